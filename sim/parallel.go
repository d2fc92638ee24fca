package sim

import (
	"runtime"
	"sync"
)

// parallel runs fn(0), ..., fn(n-1) on workers goroutines (0 or less:
// GOMAXPROCS) and returns when all are done. After each, it calls progress
// (if not nil) with the number done and n; those calls do not overlap.
func parallel(n, workers int, progress func(done, total int), fn func(i int)) {
	if workers <= 0 {
		workers = runtime.GOMAXPROCS(0)
	}
	next := make(chan int)
	var wg sync.WaitGroup
	var mu sync.Mutex
	done := 0
	for range min(workers, n) {
		wg.Go(func() {
			for i := range next {
				fn(i)
				if progress != nil {
					mu.Lock()
					done++
					progress(done, n)
					mu.Unlock()
				}
			}
		})
	}
	for i := range n {
		next <- i
	}
	close(next)
	wg.Wait()
}
