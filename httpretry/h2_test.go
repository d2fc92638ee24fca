package httpretry

import (
	"encoding/binary"
	"errors"
	"io"
	"net"
	"net/http"
	"sync/atomic"
	"testing"

	"github.com/backoffkit/retry"
)

// h2GoAwayServer is a minimal HTTP/2 (cleartext, prior knowledge) server on
// loopback: on each connection it answers the first request with GOAWAY and
// closes the connection, for the first `fail` connections; later ones get a
// 200 response with no body. It counts the connections and the requests
// (HEADERS frames).
func h2GoAwayServer(t *testing.T, fail int32) (addr string, conns, reqs *atomic.Int32) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	conns, reqs = new(atomic.Int32), new(atomic.Int32)
	frame := func(typ, flags byte, stream uint32, payload []byte) []byte {
		b := make([]byte, 9, 9+len(payload))
		b[0], b[1], b[2] = byte(len(payload)>>16), byte(len(payload)>>8), byte(len(payload))
		b[3], b[4] = typ, flags
		binary.BigEndian.PutUint32(b[5:], stream)
		return append(b, payload...)
	}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			n := conns.Add(1)
			go func(c net.Conn, goAway bool) {
				defer c.Close()
				preface := make([]byte, 24)
				if _, err := io.ReadFull(c, preface); err != nil {
					return
				}
				c.Write(frame(0x4, 0, 0, nil)) // SETTINGS
				hdr := make([]byte, 9)
				for {
					if _, err := io.ReadFull(c, hdr); err != nil {
						return
					}
					length := int(hdr[0])<<16 | int(hdr[1])<<8 | int(hdr[2])
					typ, flags, stream := hdr[3], hdr[4], binary.BigEndian.Uint32(hdr[5:])&0x7fffffff
					if _, err := io.CopyN(io.Discard, c, int64(length)); err != nil {
						return
					}
					if typ == 0x4 && flags&0x1 == 0 {
						c.Write(frame(0x4, 0x1, 0, nil)) // SETTINGS ACK
					}
					if typ != 0x1 { // not HEADERS
						continue
					}
					reqs.Add(1)
					if goAway {
						payload := make([]byte, 8)
						binary.BigEndian.PutUint32(payload, stream)  // last stream: maybe processed
						binary.BigEndian.PutUint32(payload[4:], 0x2) // INTERNAL_ERROR
						c.Write(frame(0x7, 0, 0, payload))
						return
					}
					// HEADERS with ":status: 200" (HPACK static index 8), END_STREAM|END_HEADERS.
					c.Write(frame(0x1, 0x5, stream, []byte{0x88}))
				}
			}(c, n <= fail)
		}
	}()
	return ln.Addr().String(), conns, reqs
}

// TestGoAway checks the GOAWAY classification against net/http's real
// (unexported) HTTP/2 error type.
func TestGoAway(t *testing.T) {
	addr, conns, reqs := h2GoAwayServer(t, 1)
	tr := &http.Transport{Protocols: new(http.Protocols)}
	tr.Protocols.SetUnencryptedHTTP2(true)
	defer tr.CloseIdleConnections()
	ev := newEvents()
	p := fast
	p.Observer = ev.Observe
	req, _ := http.NewRequest(http.MethodGet, "http://"+addr+"/", nil)
	resp, err := NewTransport(tr, p).RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	// Two requests, the second on a new connection. (net/http may dial one
	// more that it never uses: 1 run in about 400 under load did.)
	if resp.StatusCode != 200 || resp.ProtoMajor != 2 || reqs.Load() != 2 || conns.Load() < 2 {
		t.Fatalf("got %d over HTTP/%d after %d requests on %d connections, want 200 over HTTP/2 after 2 requests on 2 or more",
			resp.StatusCode, resp.ProtoMajor, reqs.Load(), conns.Load())
	}
	var ae *AttemptError
	r := ev.Of(retry.EventRetry)
	if len(r) != 1 || !errors.As(r[0].Err, &ae) || ae.Class != ClassGoAway {
		t.Fatalf("retries %+v, want one goaway", r)
	}

	// A POST is not retried after GOAWAY: the server may have processed it.
	addr, _, _ = h2GoAwayServer(t, 1)
	req, _ = http.NewRequest(http.MethodPost, "http://"+addr+"/", nil)
	_, err = NewTransport(tr, p).RoundTrip(req)
	if !errors.Is(err, ErrNotIdempotent) || !errors.As(err, &ae) || ae.Class != ClassGoAway {
		t.Fatalf("POST: err = %v, want ErrNotIdempotent after goaway", err)
	}
}
