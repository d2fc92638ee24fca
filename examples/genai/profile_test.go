package main

import (
	"context"
	"errors"
	"net/http"
	"slices"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/backoffkit/retry"
	"github.com/backoffkit/retry/httpretry"
	"google.golang.org/genai"
)

// TestProfileHeadersReachVertex: a Vertex AI client of the priority or
// flex profile sends the profile's headers on every attempt (the fake
// answers 503, then 200, and refuses a request whose consumption headers
// differ), whether they come from genai.HTTPOptions.Headers, from
// httpretry.WithProfile, or from both (one value each: the SDK's come
// first and the transport adds none); the answer's trafficType says which
// option served it. Without the headers the fake refuses the priority
// request (the check can fail), and standard sends none.
func TestProfileHeadersReachVertex(t *testing.T) {
	priorityOnly := http.Header{}
	priorityOnly.Set(headerRequestType, "shared")
	priorityOnly.Set(headerSharedRequestType, "priority")
	for _, tt := range []struct {
		name      string
		profile   string      // the retry profile: its policy, and the fake's expectation
		sdk       http.Header // genai.HTTPOptions.Headers; nil: none
		transport bool        // httpretry.WithProfile(profile)
		want      http.Header // what the fake requires; nil: the profile's headers
		traffic   genai.TrafficType
		refused   bool // the fake refuses the request: 400
	}{
		{name: "priority, SDK headers", profile: "priority", sdk: header(t, "priority"), traffic: genai.TrafficTypeOnDemandPriority},
		{name: "priority, WithProfile", profile: "priority", transport: true, traffic: genai.TrafficTypeOnDemandPriority},
		{name: "priority, both", profile: "priority", sdk: header(t, "priority"), transport: true, traffic: genai.TrafficTypeOnDemandPriority},
		{name: "flex, SDK headers", profile: "flex", sdk: header(t, "flex"), traffic: genai.TrafficTypeOnDemandFlex},
		{name: "flex, WithProfile", profile: "flex", transport: true, traffic: genai.TrafficTypeOnDemandFlex},
		{name: "flex, both", profile: "flex", sdk: header(t, "flex"), transport: true, traffic: genai.TrafficTypeOnDemandFlex},
		{name: "priority only (no PT first): the caller's header wins", profile: "priority", sdk: priorityOnly, transport: true,
			want: priorityOnly, traffic: genai.TrafficTypeOnDemandPriority},
		{name: "standard: no header", profile: "standard", sdk: header(t, "standard"), transport: true, traffic: genai.TrafficTypeOnDemand},
		{name: "priority without its headers: refused", profile: "priority", refused: true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				fake := newFakeGemini(reply{status: http.StatusServiceUnavailable, body: error503}, replyOK)
				fake.consumption = tt.want
				if fake.consumption == nil {
					fake.consumption = header(t, tt.profile)
				}
				p, err := retry.Profile(tt.profile)
				if err != nil {
					t.Fatal(err)
				}
				p.Jitter = retry.Zero
				var opts []httpretry.Option
				if tt.transport {
					opts = append(opts, httpretry.WithProfile(tt.profile))
				}
				hc, _ := pipeHTTPClient(t, fake, p, opts...)
				c, err := genai.NewClient(context.Background(), &genai.ClientConfig{
					APIKey: demoAPIKey, Backend: genai.BackendVertexAI, HTTPClient: hc,
					HTTPOptions: genai.HTTPOptions{BaseURL: "http://aiplatform.googleapis.com", Headers: tt.sdk},
				})
				if err != nil {
					t.Fatal(err)
				}
				text, traffic, err := generateTraffic(context.Background(), c)
				synctest.Wait()
				hits := fake.Hits()
				if tt.refused {
					var apiErr genai.APIError
					if !errors.As(err, &apiErr) || apiErr.Code != http.StatusBadRequest || len(hits) != 1 {
						t.Fatalf("generate = %v after %d requests; want the fake's 400 at once", err, len(hits))
					}
					return
				}
				if err != nil || text != wantText || traffic != tt.traffic {
					t.Fatalf("generate = %q, %q, %v; want the answer served as %s", text, traffic, err, tt.traffic)
				}
				want := fake.consumption
				if len(hits) != 2 || hits[0].status != http.StatusServiceUnavailable || hits[1].status != http.StatusOK {
					t.Fatalf("hits %+v: want a 503 then a 200", hits)
				}
				for i, h := range hits {
					if !slices.Equal(h.requestType, want.Values(headerRequestType)) || !slices.Equal(h.sharedType, want.Values(headerSharedRequestType)) {
						t.Errorf("request %d: %s %q, %s %q; want %v", i+1, headerRequestType, h.requestType, headerSharedRequestType, h.sharedType, want)
					}
					if h.path != "/v1beta1/publishers/google/models/"+model+":generateContent" || h.apiKey != demoAPIKey {
						t.Errorf("request %d: %s %s (key %q)", i+1, h.method, h.path, h.apiKey)
					}
				}
			})
		})
	}
}

// header returns httpretry.ProfileHeader(profile).
func header(t *testing.T, profile string) http.Header {
	t.Helper()
	h, err := httpretry.ProfileHeader(profile)
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// TestProfileRefusesRegionalVertex: a genai client of the priority or flex
// profile whose base URL is a regional or multi-regional Vertex AI host
// gets httpretry.ErrRegionalEndpoint through the SDK, and nothing is sent
// (the transport dials an in-memory pipe to the fake, never the network);
// the global endpoint is served.
func TestProfileRefusesRegionalVertex(t *testing.T) {
	for _, tt := range []struct {
		profile, baseURL string
		refused          bool
	}{
		{"priority", "http://us-central1-aiplatform.googleapis.com", true},
		{"priority", "http://aiplatform.eu.rep.googleapis.com", true},
		{"flex", "http://europe-west4-aiplatform.googleapis.com", true},
		{"priority", "http://aiplatform.googleapis.com", false},
		{"flex", "http://aiplatform.googleapis.com", false},
		{"standard", "http://us-central1-aiplatform.googleapis.com", false},
	} {
		t.Run(tt.profile+" "+tt.baseURL, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				fake := newFakeGemini(replyOK)
				fake.consumption = header(t, tt.profile)
				hc, _ := pipeHTTPClient(t, fake, retry.Policy{Attempts: 1}, httpretry.WithProfile(tt.profile))
				c, err := newProfileClient(context.Background(), tt.baseURL, hc, tt.profile)
				if err != nil {
					t.Fatal(err)
				}
				start := time.Now()
				_, _, err = generateTraffic(context.Background(), c)
				synctest.Wait()
				n := len(fake.Hits())
				if !tt.refused {
					if err != nil || n != 1 {
						t.Fatalf("generate = %v after %d requests, want it served", err, n)
					}
					return
				}
				if !errors.Is(err, httpretry.ErrRegionalEndpoint) || n != 0 || time.Since(start) != 0 {
					t.Fatalf("generate = %v after %d requests; want ErrRegionalEndpoint, nothing sent", err, n)
				}
				if host := strings.TrimPrefix(tt.baseURL, "http://"); !strings.Contains(err.Error(), host+" is a ") {
					t.Errorf("the error does not name %s: %v", host, err)
				}
			})
		})
	}
}
