// Package testkit holds what the tests of several modules set up alike: a
// recorder of the events an observer receives ([Recorder]), a scripted
// loopback HTTP server ([Script]), a test certificate authority with a
// server and a client certificate ([NewPKI]), a buffer that goroutines
// may write to while a test reads it ([Buffer]), a run of a test body in a
// synctest bubble over HTTP/1.1 and HTTP/2 ([InBubbleOverHTTP1And2]), a
// limit on a call through its context or its policy's Deadline
// ([Deadline]), and the CPU time of the process or of a child, for benchmarks ([CPUTime],
// [ChildUsage]). A real redis-server is started by the sibling package
// internal/redistest.
//
// It is imported only from tests. It depends on the standard library only
// and not on package retry, so that retry's own (internal) tests can use it
// too: the recorder is generic over the event type.
package testkit
