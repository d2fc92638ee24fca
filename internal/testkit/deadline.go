package testkit

import (
	"context"
	"testing"
	"time"
)

// Deadline puts a limit of d on a call in one of the two ways a caller can.
// With viaCtx it returns a context under parent that ends after d (cancelled
// when the test ends) and 0, for a policy with no Deadline of its own;
// otherwise parent itself and d, for the policy's Deadline:
//
//	ctx, p.Deadline = testkit.Deadline(t, t.Context(), viaCtx, 10*time.Second)
func Deadline(t testing.TB, parent context.Context, viaCtx bool, d time.Duration) (context.Context, time.Duration) {
	if !viaCtx {
		return parent, d
	}
	ctx, cancel := context.WithTimeout(parent, d)
	t.Cleanup(cancel)
	return ctx, 0
}
