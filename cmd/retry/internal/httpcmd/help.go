package httpcmd

// The manual page of "retry http --help". It lists the flags by hand,
// grouped, as users type them; a test checks that every flag the parser
// accepts is listed.

import (
	"fmt"
	"io"
	"sort"
	"strings"

	"github.com/backoffkit/retry/cmd/retry/internal/cli"
	"github.com/backoffkit/retry/cmd/retry/internal/curl"
	"github.com/backoffkit/retry/cmd/retry/internal/policy"
)

// writeOutText lists the variables of -w, as %{name}.
func writeOutText() string {
	names := make([]string, 0, len(curl.WriteOutVars))
	for name := range curl.WriteOutVars {
		names = append(names, name)
	}
	sort.Strings(names)
	for i, name := range names {
		names[i] = "%{" + name + "}"
	}
	return cli.Wrap(strings.Join(names, " "), 72, "        ")
}

const httpHelp = `NAME
    retry http - a curl-like HTTP client that retries with backoff and jitter

SYNOPSIS
    retry http [OPTIONS] URL

DESCRIPTION
    Sends one request the way curl does, and retries it while the answer is
    a status in --codes (408, 429, 500, 502, 503, 504) or a transient
    network error (connection refused or reset, timeouts), waiting with
    Google's truncated exponential backoff with jitter. A server's
    Retry-After header or google.rpc.RetryInfo body is honoured (capped by
    --max-retry-after). Other statuses (400, 401, 403, 404, ...) are final.

    GET, HEAD, OPTIONS, PUT and DELETE are retried. A POST or PATCH that may
    have reached the server is sent again only when it is safe to repeat:
    with --idempotent, with --idempotency-key (or an Idempotency-Key
    header), or when it calls one of Google's read-only generative AI
    methods on any host (a path .../models/NAME:generateContent, and
    streamGenerateContent, countTokens, computeTokens, embedContent,
    batchEmbedContents, predict, rawPredict on models, tunedModels or
    endpoints). Any other POST or PATCH is sent once, except after an
    answer that proves the server did not act on it: a 429, or a 503 with
    Retry-After or RetryInfo, is retried for every method, as is a refused
    connection. --not-idempotent turns off all but the last: a refused
    connection is still retried, nothing else is (for a predict call whose
    model writes, or a server that acts and then says 429).

    The body goes to stdout (or -o FILE); one line per retry goes to stderr.
    Secrets are never logged (not with -v either): Authorization, Cookie,
    API-key and token headers (x-goog-api-key, api-key, X-Auth-Token, ...),
    user info and key=, token= and similar query values are shown as
    REDACTED. A URL without a scheme is an http:// URL; one with a space or
    a control character is refused (exit 3). As in curl, no Referer is sent
    on a redirect.

    --profile NAME sets the policy and, for flex and priority, sends Vertex
    AI's consumption headers (X-Vertex-AI-LLM-Request-Type,
    X-Vertex-AI-LLM-Shared-Request-Type); a -H of the same name wins ('Name;'
    sends it empty, 'Name:' none). Those two are served by the global
    endpoint only: a regional Vertex AI host is refused (exit 2).

    For curl users, three flags differ: curl's --retry N is --attempts N+1
    here (attempts count the first one), --retry-delay is --initial-delay
    (the waits then grow exponentially), and --retry-max-time is --deadline.

OPTIONS
  Request (curl's flags and meanings):
    -X, --request METHOD     the method (default GET; POST with data; HEAD
                             with -I)
    -H, --header 'Name: value'
                             add a header (repeatable); 'Name:' leaves out
                             one retry would send (User-Agent, Accept),
                             'Name;' sends it empty
    -d, --data DATA          body (POST, application/x-www-form-urlencoded);
                             repeated -d are joined with &; @FILE reads a
                             file without its newlines, @- reads stdin
    --data-binary DATA       like -d, but @FILE is sent as is
    --data-urlencode DATA    like -d, URL-encoded: CONTENT, =CONTENT,
                             NAME=CONTENT, @FILE or NAME@FILE (only CONTENT
                             is encoded)
    --json DATA              JSON body (Content-Type and Accept
                             application/json); repeated --json are
                             concatenated
    -F, --form NAME=VALUE    multipart/form-data field; NAME=@FILE uploads a
                             file, NAME=<FILE sends its content; ;type=MIME,
                             ;filename=NAME
    -G, --get                send the -d data in the URL's query string, with
                             GET
    -u, --user USER:PASSWORD basic authentication
    -A, --user-agent NAME    User-Agent (default backoffkit-retry/VERSION)
    --url URL                the URL, as a flag
    --compressed             ask for gzip or deflate and decompress the answer
  Connection:
    -x, --proxy URL          use this HTTP proxy (default: $HTTPS_PROXY,
                             $HTTP_PROXY, but not for $NO_PROXY's hosts nor
                             for localhost and loopback addresses, see
                             PROXIES)
    -k, --insecure           do not verify the server's certificate
    --cacert FILE            trust the CA certificates in FILE (PEM)
    --connect-timeout DURATION
                             time limit to connect (TCP, a proxy's handshake,
                             TLS), per attempt (default 300s)
    -m, --max-time DURATION  time limit of each attempt (as --attempt-timeout)
    -L, --location           follow redirects to http:// and https://; each
                             hop is retried on its own (--attempts per hop),
                             --deadline bounds them all; credentials (-u,
                             Authorization, Cookie, API-key headers) go only
                             to the URL's scheme, host and port
    --location-trusted       -L, and send the credentials to every host
    --max-redirs N           follow at most N redirects (default 50; -1 for
                             no limit)
  Output:
    -o, --output FILE        write the body to FILE ("-" for stdout); FILE is
                             created at the first byte (-f on an error keeps
                             it); a binary body is not written to a terminal
                             without -o (exit 23)
    -i, --include            write the response headers before the body
                             (sorted, in net/http's canonical case: it keeps
                             no order)
    -I, --head               send HEAD and write the headers
    -D, --dump-header FILE   write the response headers to FILE ("-" for stdout)
    -w, --write-out FORMAT   write FORMAT to stdout at the end, with curl's
                             variables (see WRITE-OUT); @FILE reads it
    -f, --fail               exit 22 on a final status of 400 or above,
                             without the body (-i and -I still write the
                             headers)
    --fail-with-body         exit 22 on such a status, with the body
    -s, --silent             no retry log, no error message
    -S, --show-error         with -s, still print the error
    -v, --verbose            each attempt's request and response headers on
                             stderr
    -V, --version            the version
  Retrying:
%[1]s
    --deadline DURATION      total time for all attempts and waits, every
                             hop of -L and the body included; 0 for none
                             (default none)
    --attempt-timeout DURATION
                             time limit of one attempt; 0 for none (default
                             none)
    --codes CODES            statuses that trigger a retry, 4xx and 5xx only
                             (default 408,429,500,502,503,504)
    --max-retry-after DURATION
                             cap on a server's hint; 0 ignores hints
                             (default --max-delay)
    --retry-all-errors       retry DNS and TLS errors too
    --retry-connrefused      accepted for curl (a refused connection is always
                             retried)
    --idempotent             the request is safe to repeat: retry it whatever
                             its method
    --idempotency-key auto|VALUE
                             send an Idempotency-Key header (auto: a random
                             UUID, the same on every attempt); makes a POST
                             retryable
    --not-idempotent         never send the request again once it may have
                             reached the server (not after a 429 either;
                             turns off the Google read-only rule)
    --profile NAME           %[2]s
    --config FILE            JSON settings (see 'retry --help', CONFIG FILE)
    --seed N                 seed of the jitter (default random)
    --log-format FORMAT      text (default) or json: one JSON object per line
                             on stderr, usage errors included
    --quiet                  no retry log (the error is still printed)
  Fleet (see 'retry --help', FLEET):
    --redis URL              the Redis server the fleet shares, e.g.
                             redis://127.0.0.1:6379/0
    --fleet NAME             the fleet's key: one retry budget and one
                             cooldown (a 429's Retry-After or RetryInfo
                             pauses every process)
    --quota RATE             the fleet's quota, e.g. 40/1s or 600/1m: every
                             attempt of every process waits for its turn
                             (needs --fleet); auto or auto:MAX (e.g.
                             auto:600/1m): a rate the fleet learns from its
                             429s, from MAX (default 10000/1s) down; an
                             attempt whose turn is more than 250ms away
                             gives up (saturated, exit 1)
    --fleet-size N           the processes sharing --quota: while Redis is
                             unavailable each paces at RATE/N (default the
                             processes counted in Redis, 10 before any was)
    --redis-timeout DURATION time limit of each Redis call, at most a tenth of
                             --deadline (default 20ms)
    --redis-dial-timeout DURATION
                             time limit of a connection's setup (default 1s)
    --redis-ca FILE          CA certificates (PEM) of a rediss:// Redis
    --redis-cert FILE        client certificate (PEM) for rediss://
    --redis-key FILE         the key (PEM) of --redis-cert

    DURATION is Go syntax (1.5s, 250ms), a number of seconds or of days
    (1d). Combined one-letter flags work as in curl (-fsSL, -XPOST); flags
    may come after the URL.

WRITE-OUT
    -w FORMAT is written once the request is over, as curl writes it:
    %%{NAME} is a variable, %%header{NAME} the last answer's header NAME
    (values joined by ", "), %%%% a %%; \n \t \r \\ are escapes. Variables
    (any case):
        %[3]s
    %%{stderr} and %%{stdout} say where the rest goes, %%{onerror} writes the
    rest only if the request failed, %%{json} is every variable as a JSON
    object, %%{header_json} the last answer's header. time_* are seconds
    since the request began (its retries and waits included), for the
    attempt that got the last answer; size_request counts the request as
    HTTP/1.1 writes it; num_retries is ours. Secrets are redacted (URLs'
    user info and key=... values: REDACTED). An unknown variable is a
    warning and prints nothing; curl has these that retry http has not:
        %[4]s

PROXIES
    Without -x, the proxy comes from $HTTPS_PROXY (https URLs) or
    $HTTP_PROXY (http URLs), or their lowercase forms, except for the hosts
    in $NO_PROXY. Unlike curl, retry never sends a request for localhost or
    a loopback address (127.0.0.1, ::1) to such a proxy, whatever $NO_PROXY
    says (Go's net/http rule); -x sends every request, loopback included,
    to the proxy it names.

EXIT STATUS
    As curl's where the cause is the same; for a network error, the cause
    of the last attempt's failure, after any retries.
    0    a response came (with -f: and its status is below 400)
    1    gave up: the final answer was a status in --codes and the attempts,
         --deadline or the retry budget ran out (or the request was not
         repeatable); the log's last line says why; or the URL's protocol
         (or that of a redirect with -L) is not http or https
    2    bad usage or config
    3    the URL is malformed (a space or control character, a bad port),
         or with -L a redirect's Location
    6    the host name could not be resolved (not retried without
         --retry-all-errors)
    7    could not connect
    18   the response body ended early
    22   -f/--fail: the final status is 400 or above (and not one that was
         retried)
    23   the output could not be written (-o, -D)
    26   a request body file (-d @FILE, -F NAME=@FILE, ...) could not be read
    28   timed out (--max-time, --connect-timeout, --deadline), or the
         fleet's quota or cooldown would need a wait past --deadline
         (nothing was sent)
    35   TLS handshake or certificate error (not retried without
         --retry-all-errors)
    47   too many redirects (-L, --max-redirs)
    52   the server closed the connection without answering (empty reply)
    55   failed sending the request
    56   failed receiving the response (connection reset or closed, another
         network or protocol error)
    61   --compressed: the body is not in the Content-Encoding it claims, or
         in one retry http does not decode (br, zstd)
    77   the --cacert file cannot be read or holds no PEM certificate
    130  interrupted by Ctrl-C (SIGINT); 143 by SIGTERM: retry http ends by
         the signal, which a shell shows so

EXAMPLES
    retry http -fsS -H "x-goog-api-key: $KEY" https://host/v1/models
    retry http --json @req.json --idempotency-key auto \
        -w '%%{http_code} %%{num_retries}\n' URL
    retry http -L --attempts 8 --deadline 60s -o out.bin https://host/file
    retry http --redis redis://127.0.0.1:6379/0 --fleet gemini \
        --quota 600/1m URL
`

// printHTTPHelp prints the manual of retry http.
func printHTTPHelp(w io.Writer) {
	fmt.Fprintf(w, httpHelp, policy.BackoffFlagsText(), policy.ProfileText(), writeOutText(), cli.Wrap(curl.WriteOutMissing, 72, "        "))
}
