package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"sync/atomic"

	"github.com/backoffkit/retry/cmd/retry/internal/demo"
)

// The command mode: a command that keeps failing with exit code 3 is run
// three times, and retry exits with its last exit code. Waits double from
// --initial-delay (no jitter here, so the output is fixed but for the time
// taken, shown as T).
func Example() {
	var out bytes.Buffer
	code := run([]string{"--attempts", "3", "--initial-delay", "10ms", "--jitter", "0",
		"--", "sh", "-c", "echo working; exit 3"}, nil, &out, &out)
	fmt.Print(regexp.MustCompile(`after [0-9.]+m?s`).ReplaceAllString(out.String(), "after T"))
	fmt.Println("exit status", code)
	// Output:
	// working
	// retry: attempt 1/3 failed: exit code 3; retrying in 10ms
	// working
	// retry: attempt 2/3 failed: exit code 3; retrying in 20ms
	// working
	// retry: attempt 3/3 failed: exit code 3; giving up after T (no attempts left)
	// exit status 3
}

// retry http against a server that fails twice with 503, then answers.
func Example_http() {
	var n atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if n.Add(1) <= 2 {
			http.Error(w, "busy", http.StatusServiceUnavailable)
			return
		}
		fmt.Fprintln(w, `{"text": "hello"}`)
	}))
	defer srv.Close()

	var out bytes.Buffer
	code := run([]string{"http", "--initial-delay", "10ms", "--jitter", "0", srv.URL + "/v1/models?key=SECRET"}, nil, &out, &out)
	fmt.Print(strings.ReplaceAll(out.String(), srv.URL, "http://127.0.0.1:PORT"))
	fmt.Println("exit status", code)
	// Output:
	// retry http: attempt 1/5 failed: GET http://127.0.0.1:PORT/v1/models?key=REDACTED: 503 Service Unavailable; retrying in 10ms
	// retry http: attempt 2/5 failed: GET http://127.0.0.1:PORT/v1/models?key=REDACTED: 503 Service Unavailable; retrying in 20ms
	// {"text": "hello"}
	// retry http: attempt 3/5 succeeded
	// exit status 0
}

// retry demo, briefly, with its JSON summary: every request ends as a
// success or a give-up, and retrying beats not retrying.
func Example_demo() {
	var out, progress bytes.Buffer
	code := run([]string{"demo", "--scenario", "random", "--duration", "500ms", "--clients", "4", "--strategies", "no-retry,google", "--json"}, nil, &out, &progress)
	var sum demo.Summary
	json.Unmarshal(out.Bytes(), &sum)
	for _, s := range sum.Strategies {
		fmt.Println(s.Name, "adds up:", s.Requests == s.Successes+s.GiveUps)
	}
	fmt.Println("google beats no-retry:", sum.Strategies[1].SuccessRate > sum.Strategies[0].SuccessRate)
	fmt.Println("exit status", code)
	// Output:
	// no-retry adds up: true
	// google adds up: true
	// google beats no-retry: true
	// exit status 0
}
