package errchain_test

import (
	"fmt"
	"time"

	"github.com/backoffkit/retry/internal/errchain"
)

type hint struct{ d time.Duration }

func (h hint) Error() string             { return "slow down" }
func (h hint) RetryAfter() time.Duration { return h.d }

func ExampleFind() {
	err := fmt.Errorf("call: %w", hint{3 * time.Second})
	h := errchain.Find(err, func(e error) interface{ RetryAfter() time.Duration } {
		h, _ := e.(interface{ RetryAfter() time.Duration })
		return h
	})
	fmt.Println(h.RetryAfter())
	// Output: 3s
}

func ExampleFindBeforeNil() {
	var missing *hintPtr // a nil pointer returned as an error
	err := fmt.Errorf("call: %w", error(missing))
	msg := errchain.FindBeforeNil(err, func(e error) string {
		if h, ok := e.(*hintPtr); ok {
			return h.msg // would panic on the nil pointer: it is never asked
		}
		return ""
	})
	fmt.Printf("%q\n", msg)
	// Output: ""
}

type hintPtr struct{ msg string }

func (h *hintPtr) Error() string { return h.msg }
