package main

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/backoffkit/retry/cmd/retry/internal/curl"
	"golang.org/x/sys/unix"
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
	if code := run([]string{"http", url + "/bin"}, strings.NewReader(""), slave, &errb); code != curl.ExitWrite || !strings.Contains(errb.String(), "binary output can mess up your terminal") {
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

// TestDemoDetectsTheTerminal runs the demo binary on a pseudo-terminal:
// the synchronized scenario at 80x24 gets the compact report (its whole
// report takes 38 lines), the random one at 80x60 the whole of it, whose
// legend the first leaves out.
func TestDemoDetectsTheTerminal(t *testing.T) {
	for _, tc := range []struct {
		rows   uint16
		args   []string
		legend string
	}{
		{24, []string{"--duration", "2500ms"}, "attempts: requests + retries; give-ups"},
		{60, []string{"--scenario", "random", "--duration", "300ms", "--clients", "4"}, "attempts: requests + retries made by httpretry"},
	} {
		rows := tc.rows
		master, slave := openPTY(t)
		if err := unix.IoctlSetWinsize(int(slave.Fd()), unix.TIOCSWINSZ, &unix.Winsize{Row: rows, Col: 80}); err != nil {
			t.Skipf("cannot size the pseudo-terminal: %v", err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		cmd := exec.CommandContext(ctx, bin, append([]string{"demo"}, tc.args...)...)
		cmd.Stdout = slave
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		slave.Close() // the demo's copy is the last: its exit ends the master's reads
		var out bytes.Buffer
		io.Copy(&out, master) // until EIO: the demo has exited
		if err := cmd.Wait(); err != nil {
			t.Fatalf("%d rows: %v", rows, err)
		}
		text := strings.ReplaceAll(out.String(), "\r\n", "\n")
		legend := strings.Contains(text, tc.legend)
		pointer := strings.Contains(text, "(legend and whole conclusion: a terminal of") || strings.Contains(text, "(legend: a terminal of")
		if rows == 24 && (legend || !pointer) || rows == 60 && (!legend || pointer) {
			t.Errorf("%d rows: legend %v, pointer %v; want the compact view at 24 rows and the whole at 60:\n%s", rows, legend, pointer, text)
		}
	}
}
