package testkit

import (
	"strconv"
	"testing"
	"testing/synctest"
)

// InBubbleOverHTTP1And2 runs f in a synctest bubble twice, over HTTP/1.1 (h2
// false) and over HTTP/2 (h2 true), as the subtests "http2=false" and
// "http2=true".
func InBubbleOverHTTP1And2(t *testing.T, f func(t *testing.T, h2 bool)) {
	t.Helper()
	for _, h2 := range []bool{false, true} {
		t.Run("http2="+strconv.FormatBool(h2), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) { f(t, h2) })
		})
	}
}
