// Package demo is "retry demo": loopback servers that fail the way real
// services do (a flaky one for the random scenario, one of fixed capacity
// for the synchronized and quota herds), retry strategies side by side
// against them, and the report: tables, charts and a conclusion. Its usage
// text is demoUsage, beside Run.
package demo
