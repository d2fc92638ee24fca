package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/backoffkit/retry/cmd/retry/internal/cli"
)

// TestHTTPGoogleReadOnly runs the binary as issue 28 item 4 asks: a POST to
// a Gemini read-only method is retried after a 503 without --idempotent
// (httpretry's Google rule), a POST to another path is not, and
// --not-idempotent turns the rule off for the one request.
func TestHTTPGoogleReadOnly(t *testing.T) {
	req := filepath.Join(t.TempDir(), "req.json")
	if err := os.WriteFile(req, []byte(`{"contents":[{"parts":[{"text":"hi"}]}]}`), 0o600); err != nil {
		t.Fatal(err)
	}
	const gen = "/v1beta/models/gemini-2.5-flash:generateContent"
	for _, tc := range []struct {
		name     string
		path     string
		flags    []string
		statuses []int
		requests int
		code     int
		stderr   string
	}{
		{"generateContent", gen, nil, []int{503, 200}, 2, 0, "attempt 2/5 succeeded"},
		{"countTokens", "/v1beta/models/gemini-2.5-flash:countTokens", nil, []int{500, 200}, 2, 0, "attempt 2/5 succeeded"},
		{"vertex rawPredict", "/v1/projects/p/locations/us-central1/endpoints/1234:rawPredict", nil, []int{503, 200}, 2, 0, "attempt 2/5 succeeded"},
		{"other path", "/v1/orders", nil, []int{503, 200}, 1, cli.ExitGaveUp, "POST is not idempotent; pass --idempotent or --idempotency-key"},
		{"file upload", "/upload/v1beta/files", nil, []int{500, 200}, 1, cli.ExitGaveUp, "POST is not idempotent"},
		{"other path refused", "/v1/orders", nil, []int{429, 200}, 2, 0, "attempt 2/5 succeeded"},
		{"not-idempotent", gen, []string{"--not-idempotent"}, []int{503, 200}, 1, cli.ExitGaveUp, "the request is marked --not-idempotent"},
		{"not-idempotent refused", gen, []string{"--not-idempotent"}, []int{429, 200}, 1, cli.ExitGaveUp, "the request is marked --not-idempotent"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := &scripted{statuses: tc.statuses}
			url := serve(t, s)
			r := runRetry(t, "", nil, args([]string{"http", "-X", "POST", url + tc.path, "-d", "@" + req, "-H", "Content-Type: application/json"}, tc.flags, fast)...)
			if s.count() != tc.requests || r.code != tc.code {
				t.Errorf("exit %d after %d requests, want exit %d after %d; stderr:\n%s", r.code, s.count(), tc.code, tc.requests, r.stderr)
			}
			if !strings.Contains(r.stderr, tc.stderr) {
				t.Errorf("stderr lacks %q:\n%s", tc.stderr, r.stderr)
			}
			for i, body := range s.reqBody {
				if body != `{"contents":[{"parts":[{"text":"hi"}]}]}` {
					t.Errorf("attempt %d sent body %q", i+1, body)
				}
			}
		})
	}
}

// TestHTTPNotIdempotentConflicts checks that --not-idempotent cannot be
// combined with a flag that says the opposite.
func TestHTTPNotIdempotentConflicts(t *testing.T) {
	for _, flags := range [][]string{
		{"--not-idempotent", "--idempotent"},
		{"--not-idempotent", "--idempotency-key", "auto"},
		{"--not-idempotent", "-H", "Idempotency-Key: k1"},
	} {
		r := runRetry(t, "", nil, args([]string{"http", "-d", "x"}, flags, []string{"http://127.0.0.1:1/"})...)
		if r.code != cli.ExitUsage || !strings.Contains(r.stderr, "--not-idempotent") {
			t.Errorf("%q: exit %d, stderr:\n%s", flags, r.code, r.stderr)
		}
	}
}
