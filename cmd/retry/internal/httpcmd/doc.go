// Package httpcmd is "retry http", a curl-like client that retries: its
// flags (curl's and the policy's), the request it builds, the transport
// (proxy, TLS, connect timeout, redirects), the run and what it writes
// (package curl says how). Its manual is httpHelp, beside Run.
package httpcmd
