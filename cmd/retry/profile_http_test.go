package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/backoffkit/retry/cmd/retry/internal/cli"
)

// TestHTTPProfileHeaders (issue 24 item 1): retry http --profile sends the
// profile's Vertex AI consumption headers (httpretry.WithProfile), on every
// attempt; a -H of the same header wins, "-H 'Name;'" sends it empty and
// "-H 'Name:'" sends none. Before, --profile set the policy only.
func TestHTTPProfileHeaders(t *testing.T) {
	const rt, srt = "X-Vertex-Ai-Llm-Request-Type", "X-Vertex-Ai-Llm-Shared-Request-Type"
	cfg := filepath.Join(t.TempDir(), "retry.json")
	if err := os.WriteFile(cfg, []byte(`{"profile": "flex"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	absent := []string(nil)
	for _, tc := range []struct {
		name    string
		flags   []string
		rt, srt []string
	}{
		{"flex", []string{"--profile", "flex"}, []string{"shared"}, []string{"flex"}},
		{"FLEX any case", []string{"--profile", "FLEX"}, []string{"shared"}, []string{"flex"}},
		{"priority", []string{"--profile", "priority"}, absent, []string{"priority"}},
		{"standard", []string{"--profile", "standard"}, absent, absent},
		{"provisioned", []string{"--profile", "provisioned"}, absent, absent},
		{"none", nil, absent, absent},
		{"config file", []string{"--config", cfg}, []string{"shared"}, []string{"flex"}},
		{"-H wins", []string{"--profile", "flex", "-H", "X-Vertex-AI-LLM-Shared-Request-Type: priority"}, []string{"shared"}, []string{"priority"}},
		{"-H empty", []string{"--profile", "flex", "-H", "X-Vertex-AI-LLM-Shared-Request-Type;"}, []string{"shared"}, []string{""}},
		{"-H removed", []string{"--profile", "flex", "-H", "x-vertex-ai-llm-shared-request-type:", "-H", "X-Vertex-AI-LLM-Request-Type:"}, absent, absent},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := &scripted{statuses: []int{503, 200}}
			url := serve(t, s)
			r := runRetry(t, "", nil, args([]string{"http"}, tc.flags, fast, []string{url})...)
			if r.code != 0 || s.count() != 2 {
				t.Fatalf("exit %d after %d requests; stderr:\n%s", r.code, s.count(), r.stderr)
			}
			for i, req := range s.seen {
				if got := req.Header[rt]; !equalValues(got, tc.rt) {
					t.Errorf("attempt %d: %s = %q, want %q", i+1, rt, got, tc.rt)
				}
				if got := req.Header[srt]; !equalValues(got, tc.srt) {
					t.Errorf("attempt %d: %s = %q, want %q", i+1, srt, got, tc.srt)
				}
			}
		})
	}
}

func equalValues(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// TestHTTPProfileRegionalEndpoint: under --profile priority or flex, a
// regional Vertex AI host is refused before anything is sent, with one line
// naming --profile (exit 2); the request goes nowhere (the proxy, a
// loopback server, sees nothing), and the key in the URL is not shown.
func TestHTTPProfileRegionalEndpoint(t *testing.T) {
	proxy := &scripted{statuses: []int{200}}
	purl := serve(t, proxy)
	const url = "https://us-central1-aiplatform.googleapis.com/v1/projects/p/locations/us-central1/publishers/google/models/gemini-2.5-flash:generateContent?key=s3cret"
	for _, tc := range []struct {
		flags []string
		want  string
	}{
		{[]string{"--profile", "priority"}, "retry http: --profile priority: POST https://us-central1-aiplatform.googleapis.com/"},
		{[]string{"--profile", "flex"}, "retry http: --profile flex: POST https://us-central1-aiplatform.googleapis.com/"},
	} {
		r := runRetry(t, "", nil, args([]string{"http", "-x", purl, "-d", "{}"}, tc.flags, []string{url})...)
		if r.code != cli.ExitUsage || strings.Count(r.stderr, "\n") != 1 || !strings.HasPrefix(r.stderr, tc.want) ||
			!strings.Contains(r.stderr, "is a regional Vertex AI endpoint") || strings.Contains(r.stderr, "s3cret") {
			t.Errorf("%q: exit %d, want 2 and one line %q...; stderr:\n%s", tc.flags, r.code, tc.want, r.stderr)
		}
	}
	// The global endpoint, and standard on a regional one, go ahead (to the
	// proxy).
	for _, c := range [][]string{
		{"--profile", "priority", "http://aiplatform.googleapis.com/v1/x:generateContent"},
		{"--profile", "standard", strings.Replace(url, "https://", "http://", 1)},
	} {
		r := runRetry(t, "", nil, args([]string{"http", "-x", purl, "-d", "{}"}, c)...)
		if r.code != 0 {
			t.Errorf("%q: exit %d; stderr:\n%s", c, r.code, r.stderr)
		}
	}
	if proxy.count() != 2 {
		t.Errorf("the proxy saw %d requests, want 2 (the refused ones sent nothing)", proxy.count())
	}
}
