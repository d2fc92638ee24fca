// Package clitest holds what the tests of several of the command's
// packages share. Only tests import it.
package clitest

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// MemTransport hands each request to Handler in process (no socket), so
// that a test runs on synctest's virtual clock.
type MemTransport struct{ Handler http.Handler }

// RoundTrip serves r with m.Handler and returns its response, or r's
// context's error once it is done.
func (m MemTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	rec := httptest.NewRecorder()
	m.Handler.ServeHTTP(rec, r)
	if err := r.Context().Err(); err != nil {
		return nil, err
	}
	res := rec.Result()
	res.Request = r
	return res, nil
}

// DisplayWidth is the number of columns s takes on a terminal: one per rune,
// a tab advancing to the next multiple of 8.
func DisplayWidth(s string) int {
	w := 0
	for _, r := range s {
		if r == '\t' {
			w += 8 - w%8
			continue
		}
		w++
	}
	return w
}

// JSONLines parses every line of s as a JSON object with an RFC 3339 "time",
// failing the test on any other line.
func JSONLines(t *testing.T, s string) []map[string]any {
	t.Helper()
	var out []map[string]any
	for _, l := range strings.Split(strings.TrimSuffix(s, "\n"), "\n") {
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Errorf("not a JSON line: %q", l)
			continue
		}
		ts, _ := m["time"].(string)
		if _, err := time.Parse(time.RFC3339, ts); err != nil {
			t.Errorf("line %q: time %q is not RFC 3339", l, ts)
		}
		out = append(out, m)
	}
	return out
}
