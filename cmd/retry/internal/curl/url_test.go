package curl

import (
	"net/url"
	"testing"
)

func TestSameOrigin(t *testing.T) {
	for _, tc := range []struct {
		a, b string
		want bool
	}{
		{"http://h/x", "http://h/y?z", true},
		{"http://h/x", "http://H:80/", true},
		{"https://h/", "https://h:443/", true},
		{"http://h/", "https://h/", false},
		{"http://h:8080/", "http://h:8081/", false},
		{"http://h/", "http://sub.h/", false},
		{"http://h/", "http://h./", false},
		{"http://[::1]:80/", "http://[::1]/", true},
	} {
		a, b := mustURL(t, tc.a), mustURL(t, tc.b)
		if got := SameOrigin(a, b); got != tc.want {
			t.Errorf("sameOrigin(%s, %s) = %v, want %v", tc.a, tc.b, got, tc.want)
		}
	}
}

func mustURL(t *testing.T, s string) *url.URL {
	t.Helper()
	u, err := url.Parse(s)
	if err != nil {
		t.Fatal(err)
	}
	return u
}
