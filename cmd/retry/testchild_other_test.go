//go:build !linux

package main

func testChild(string) int { return 2 }
