package chaos

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"strconv"
)

// Body is a deterministic pseudo-random byte stream of Len bytes, generated
// on the fly from Seed: a body of any size costs no memory, and the same
// (Seed, Len) always gives the same bytes, so a replay can be checked.
type Body struct {
	Seed uint64
	Len  int64
}

// Open returns a fresh reader of the body from its first byte.
func (b Body) Open() io.ReadCloser {
	var key [32]byte
	binary.LittleEndian.PutUint64(key[:], b.Seed)
	binary.LittleEndian.PutUint64(key[8:], 0x6368616f73) // "chaos"
	return &bodyReader{gen: rand.NewChaCha8(key), left: b.Len}
}

// Sum returns the hex SHA-256 of the body, computed by streaming it.
func (b Body) Sum() string {
	h := sha256.New()
	r := b.Open()
	if _, err := io.Copy(h, r); err != nil {
		panic(err) // a bodyReader never fails
	}
	return hex.EncodeToString(h.Sum(nil))
}

// Attach makes b the body of req: it sets Body and ContentLength, declares
// the length and checksum in the X-Chaos-Body-Len and X-Chaos-Body-Sum
// headers for the server to check, and, if replayable, sets GetBody so that
// the body can be sent again without being buffered.
func (b Body) Attach(req *http.Request, replayable bool) {
	req.Body = b.Open()
	req.ContentLength = b.Len
	if b.Len == 0 {
		req.Body = http.NoBody
	}
	req.GetBody = nil
	if replayable {
		req.GetBody = func() (io.ReadCloser, error) {
			if b.Len == 0 {
				return http.NoBody, nil
			}
			return b.Open(), nil
		}
	}
	req.Header.Set(HeaderBodyLen, strconv.FormatInt(b.Len, 10))
	req.Header.Set(HeaderBodySum, b.Sum())
}

type bodyReader struct {
	gen  *rand.ChaCha8
	left int64
}

func (r *bodyReader) Read(p []byte) (int, error) {
	if r.left <= 0 {
		return 0, io.EOF
	}
	if int64(len(p)) > r.left {
		p = p[:r.left]
	}
	n, _ := r.gen.Read(p) // ChaCha8.Read never fails
	r.left -= int64(n)
	return n, nil
}

func (r *bodyReader) Close() error { return nil }

// ErrCorrupt reports a body that ended cleanly but whose length or checksum
// differs from what its sender declared: a silent truncation, doubling or
// corruption, the one outcome a retrying client must never produce.
var ErrCorrupt = errors.New("chaos: body received truncated, doubled or corrupted")

// ReadChecked reads resp.Body to its end, closes it and returns the number of
// bytes read. If the server declared the body's checksum (X-Chaos-Sum) it is
// checked: a body that ends cleanly with another length or checksum gives an
// error wrapping ErrCorrupt. A body that cannot be read to its end gives the
// read error (a visible failure, not a silent one).
func ReadChecked(resp *http.Response) (int64, error) {
	defer resp.Body.Close()
	h := sha256.New()
	n, err := io.Copy(h, resp.Body)
	if err != nil {
		return n, err
	}
	want := resp.Header.Get(HeaderSum)
	if want == "" {
		return n, nil
	}
	if resp.ContentLength >= 0 && n != resp.ContentLength {
		return n, fmt.Errorf("%w: got %d bytes, Content-Length %d", ErrCorrupt, n, resp.ContentLength)
	}
	if got := hex.EncodeToString(h.Sum(nil)); got != want {
		return n, fmt.Errorf("%w: %d bytes with checksum %.12s…, want %.12s…", ErrCorrupt, n, got, want)
	}
	return n, nil
}
