module github.com/backoffkit/retry

go 1.26
