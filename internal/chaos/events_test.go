package chaos

import (
	"slices"
	"testing"
)

// Events is the independent parser that httpretry's stream scanner is
// compared with (FuzzStreamPeek): each format's complete events, and a
// leading byte order mark passed over as the scanner does.
func TestEvents(t *testing.T) {
	const bom = "\ufeff"
	tests := []struct {
		ct, raw string
		clean   bool
		want    []string
		stream  bool
	}{
		{"text/event-stream", "data: a\n\ndata: b\r\ndata: c\r\n\r\n", true, []string{"a", "b\nc"}, true},
		{"text/event-stream", "data: a\n\ndata: b\n", true, []string{"a"}, true}, // the second not ended
		{"text/event-stream", bom + "data: a\n\n", true, []string{"a"}, true},
		{"text/event-stream; charset=utf-8", ": ping\n\nevent: x\n\n", true, nil, true},
		{"application/x-ndjson", "{\"a\":1}\n\n {\"b\":2}", true, []string{"{\"a\":1}", " {\"b\":2}"}, true},
		{"application/x-ndjson", "{\"a\":1}\n{\"b\":2}", false, []string{"{\"a\":1}"}, true}, // cut: the last not complete
		{"application/x-ndjson", bom, true, nil, true},                                       // FuzzStreamPeek/59e3d2f2504d42d5: a BOM alone is no event
		{"application/x-ndjson", bom + "\n{\"a\":1}\n", true, []string{"{\"a\":1}"}, true},
		{"application/x-ndjson", "\n" + bom + "\n", true, []string{bom}, true}, // only a leading one is passed over
		{"application/json", "[{\"a\":1}, 2, [3", true, []string{"{\"a\":1}", "2"}, true},
		{"application/json", bom + "[1]", true, []string{"1"}, true},
		{"application/json", "{\"error\":{}}", true, nil, true}, // not an array
		{"text/plain", "data: a\n\n", true, nil, false},
	}
	for _, tt := range tests {
		evs, ok := Events(tt.ct, []byte(tt.raw), tt.clean)
		var got []string
		for _, e := range evs {
			got = append(got, string(e))
		}
		if ok != tt.stream || !slices.Equal(got, tt.want) {
			t.Errorf("Events(%q, %q, %v) = %q, %v; want %q, %v", tt.ct, tt.raw, tt.clean, got, ok, tt.want, tt.stream)
		}
	}
}
