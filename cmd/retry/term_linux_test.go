package main

import (
	"bytes"
	"io"
	"net/http"
	"strings"
	"testing"
)

// TestBinaryToTerminal: a body with a NUL byte is not written to a
// terminal that was not asked for (curl's "Binary output can mess up your
// terminal", exit 23); "-o -" writes it anyway; text goes through.
func TestBinaryToTerminal(t *testing.T) {
	master, slave := openPTY(t)
	go io.Copy(io.Discard, master) // keep the terminal's buffer from filling
	url, _ := counting(t, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/bin" {
			w.Write([]byte("\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR"))
			return
		}
		io.WriteString(w, "text\n")
	})
	var errb bytes.Buffer
	if code := run([]string{"http", url + "/bin"}, strings.NewReader(""), slave, &errb); code != curlWrite || !strings.Contains(errb.String(), "binary output can mess up your terminal") {
		t.Errorf("binary to a terminal: exit %d, stderr %q; want 23", code, errb.String())
	}
	for _, a := range [][]string{{"-o", "-", url + "/bin"}, {url + "/text"}} {
		errb.Reset()
		if code := run(append([]string{"http"}, a...), strings.NewReader(""), slave, &errb); code != 0 {
			t.Errorf("%q to a terminal: exit %d, stderr %q", a, code, errb.String())
		}
	}
	errb.Reset()
	var out bytes.Buffer
	if code := run([]string{"http", url + "/bin"}, strings.NewReader(""), &out, &errb); code != 0 || out.Len() != 16 {
		t.Errorf("binary to a pipe: exit %d, %d bytes, stderr %q", code, out.Len(), errb.String())
	}
}
