package testkit

import (
	"context"
	"testing"
	"testing/synctest"
	"time"
)

// TestDeadline: through the context, the limit is the context's deadline
// (under the parent) and the policy gets none; through the policy, the
// context is the parent itself and the policy gets the limit. The context
// ends when its test does.
func TestDeadline(t *testing.T) {
	type key struct{}
	parent := context.WithValue(context.Background(), key{}, "parent")
	var ctx context.Context
	t.Run("via the context", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			c, d := Deadline(t, parent, true, 10*time.Second)
			dl, ok := c.Deadline()
			if !ok || !dl.Equal(time.Now().Add(10*time.Second)) || d != 0 || c.Value(key{}) != "parent" {
				t.Fatalf("deadline %v (%v), policy's %v, value %v: want the context to end in 10s under parent, none for the policy", dl, ok, d, c.Value(key{}))
			}
			ctx = c
		})
	})
	if ctx == nil || ctx.Err() == nil {
		t.Error("the context outlived its test")
	}
	c, d := Deadline(t, parent, false, 10*time.Second)
	if _, ok := c.Deadline(); c != parent || ok || d != 10*time.Second {
		t.Fatalf("context %v, policy's %v: want the parent itself and 10s for the policy", c, d)
	}
}
