package main

import (
	"bufio"
	"fmt"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/backoffkit/retry/cmd/retry/internal/cli"
	"github.com/backoffkit/retry/cmd/retry/internal/clitest"
)

// TestJSONLogUsageErrorBeforeTheFlag: a usage error found before (or after)
// --log-format json is reported as JSON too, in both modes, and only a
// --log-format that the flag package would read counts (review 3, item 24).
func TestJSONLogUsageErrorBeforeTheFlag(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		json bool
	}{
		{"bad value before", []string{"--attempts", "x", "--log-format", "json", "--", "true"}, true},
		{"unknown flag before", []string{"--nope", "--log-format=json", "--", "true"}, true},
		{"one dash", []string{"--nope", "-log-format", "json", "--", "true"}, true},
		{"http unknown flag before", []string{"http", "--nope", "--log-format", "json", "http://127.0.0.1:1/"}, true},
		{"http bad header before", []string{"http", "-H", "x", "--log-format", "json", "http://127.0.0.1:1/"}, true},
		{"http after the URL", []string{"http", "-fsSLZ", "http://127.0.0.1:1/", "--log-format", "json"}, true},
		{"the value of -H", []string{"http", "-H", "--log-format", "json", "http://127.0.0.1:1/"}, false},
		{"after --", []string{"--nope", "--", "x", "--log-format", "json"}, false},
		{"the command's argument", []string{"--attempts", "x", "cmd", "--log-format", "json"}, false},
		{"last one wins", []string{"--nope", "--log-format", "json", "--log-format", "text", "--", "true"}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := runRetry(t, "", nil, tc.args...)
			if r.code != cli.ExitUsage {
				t.Errorf("exit %d, want 2; stderr:\n%s", r.code, r.stderr)
			}
			if !tc.json {
				if strings.HasPrefix(r.stderr, "{") {
					t.Errorf("JSON, want text: %s", r.stderr)
				}
				return
			}
			got := clitest.JSONLines(t, r.stderr)
			if len(got) != 1 || got[0]["event"] != "usage-error" {
				t.Errorf("want one usage-error object, got:\n%s", r.stderr)
			}
		})
	}
}

// TestJSONLogNetHTTPLines: net/http's own log lines (here a Transport's
// "Unsolicited response received on idle HTTP channel", written with the log
// package) are JSON objects too with --log-format json, not raw text among
// the JSON lines (review 3, item 24); in text they are retry http's lines,
// redacted; -s and --quiet hide them (review 6).
func TestJSONLogNetHTTPLines(t *testing.T) {
	for _, tc := range []struct {
		name  string
		flags []string
	}{
		{"json", []string{"--log-format", "json"}},
		{"text", nil},
		{"-s", []string{"-s"}},
		{"--quiet", []string{"--quiet"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			url := junkAfter503(t)
			r := runRetry(t, "", nil, append(append([]string{"http"}, tc.flags...), "--attempts", "2", "--initial-delay", "300ms", "--jitter", "0", url)...)
			if r.code != 0 || r.stdout != "ok" {
				t.Fatalf("exit %d, stdout %q, stderr:\n%s", r.code, r.stdout, r.stderr)
			}
			var logged []string
			switch tc.name {
			case "json":
				for _, m := range clitest.JSONLines(t, r.stderr) {
					if m["event"] == "log" {
						logged = append(logged, fmt.Sprint(m["message"]))
					}
				}
			case "text":
				logged = lines(r.stderr, "retry http: ")
				logged = slices.DeleteFunc(logged, func(l string) bool { return strings.Contains(l, "attempt ") || strings.Contains(l, "hint") })
			}
			switch {
			case tc.name == "-s" || tc.name == "--quiet":
				if r.stderr != "" {
					t.Errorf("%s: want nothing on stderr, got:\n%s", tc.name, r.stderr)
				}
			case len(logged) != 1 || !strings.Contains(logged[0], "Unsolicited response received on idle HTTP channel"):
				t.Errorf("want net/http's line as one of retry's, got %q; stderr:\n%s", logged, r.stderr)
			}
			if strings.Contains(r.stderr, "s3cret") {
				t.Errorf("a secret reached the log:\n%s", r.stderr)
			}
		})
	}
}

// junkAfter503 serves a 503 followed by bytes nobody asked for on the idle
// connection (net/http logs them), then 200 "ok" on the next connection.
func junkAfter503(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	t.Cleanup(wg.Wait)
	t.Cleanup(func() { ln.Close() })
	wg.Add(1)
	go func() {
		defer wg.Done()
		for n := 0; ; n++ {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer c.Close()
				if _, err := http.ReadRequest(bufio.NewReader(c)); err != nil {
					return
				}
				if n == 0 {
					fmt.Fprint(c, "HTTP/1.1 503 Service Unavailable\r\nContent-Length: 0\r\n\r\nJUNK /v1?key=s3cret")
					c.(*net.TCPConn).CloseWrite()
					bufio.NewReader(c).ReadByte() // until the client closes
					return
				}
				fmt.Fprint(c, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok")
			}()
		}
	}()
	return "http://" + ln.Addr().String() + "/"
}
