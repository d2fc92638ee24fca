// Package clitest holds what the tests of several of the command's
// packages share. Only tests import it.
package clitest

import (
	"net/http"
	"net/http/httptest"
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
