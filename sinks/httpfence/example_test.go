package httpfence_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"

	"github.com/holdfast-go/holdfast/fence"
	"github.com/holdfast-go/holdfast/sinks/httpfence"
	"github.com/holdfast-go/holdfast/sinks/httpfence/httpfencetest"
)

// exampleKey stands for a key loaded from a secret store: 32 random bytes
// shared by the lease holders and the service, and nobody else.
var exampleKey = httpfence.Key{ID: "2026-12", Secret: []byte("0123456789abcdef0123456789abcdef")}

// A payment endpoint behind the middleware: the second request with the
// same key gets the stored answer, and the handler runs once. Fencing
// headers are admitted only when signed with a key of the Verifier, so a
// caller that holds no lease cannot move the fence.
func ExampleMiddleware() {
	verifier, err := httpfence.NewVerifier(exampleKey) // list two keys while rotating
	if err != nil {
		fmt.Println(err)
		return
	}
	mw, err := httpfence.Middleware(httpfence.Options{
		Store:    httpfencetest.NewMemoryStore(), // redisstore.NewStore or pgstore.NewStore in production
		Fence:    httpfencetest.NewMemoryFence(),
		Verifier: verifier,
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	var charges atomic.Int64
	srv := httptest.NewServer(mw(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := charges.Add(1)
		w.WriteHeader(http.StatusCreated)
		fmt.Fprintf(w, "charge #%d", n)
	})))
	defer srv.Close()

	signer, err := httpfence.NewSigner(exampleKey)
	if err != nil {
		fmt.Println(err)
		return
	}
	client := &http.Client{Transport: &httpfence.Transport{Base: srv.Client().Transport, Signer: signer}}
	h := fence.Holder{Scope: "payouts", Token: 1001, Owner: "replica-a"} // a lease's l.Holder()
	ctx := httpfence.WithIdempotencyKey(fence.WithHolder(context.Background(), h), "order-7")
	for range 2 {
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, srv.URL+"/charges", strings.NewReader(`{"amount":1250}`))
		resp, err := client.Do(req)
		if err != nil {
			fmt.Println(err)
			return
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		fmt.Println(resp.StatusCode, string(body))
	}

	// The same request without a signature (curl, or a client without the
	// key) is refused before any store is touched.
	req, _ := http.NewRequest(http.MethodPost, srv.URL+"/charges", strings.NewReader(`{"amount":1250}`))
	req.Header.Set("Idempotency-Key", `"order-8"`)
	req.Header.Set("Fencing-Token", "1002")
	req.Header.Set("Fencing-Owner", `"evil"`)
	req.Header.Set("Fencing-Scope", `"payouts"`)
	resp, err := srv.Client().Do(req)
	if err != nil {
		fmt.Println(err)
		return
	}
	resp.Body.Close()
	fmt.Println("unsigned:", resp.StatusCode)
	fmt.Println("charges made:", charges.Load())
	// Output:
	// 201 charge #1
	// 201 charge #1
	// unsigned: 403
	// charges made: 1
}

// A job sends its slot's idempotency key and its lease's fencing token
// through a Transport. A holder whose token has been superseded gets a
// *fence.StaleTokenError instead of a response, and stops.
func ExampleTransport() {
	verifier, _ := httpfence.NewVerifier(exampleKey)
	mw, _ := httpfence.Middleware(httpfence.Options{
		Store:    httpfencetest.NewMemoryStore(),
		Fence:    httpfencetest.NewMemoryFence(),
		Verifier: verifier,
	})
	srv := httptest.NewServer(mw(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusAccepted)
	})))
	defer srv.Close()
	signer, _ := httpfence.NewSigner(exampleKey)
	client := &http.Client{Transport: &httpfence.Transport{Base: srv.Client().Transport, Signer: signer}}

	settle := func(key string, token fence.Token, owner string) error {
		// In a job, the run's ctx carries run.Holder() already (Scope: the
		// lease name, sent as Fencing-Scope); add
		// httpfence.WithIdempotencyKey(ctx, run.IdempotencyKey).
		h := fence.Holder{Scope: "settle", Token: token, Owner: owner}
		ctx := httpfence.WithIdempotencyKey(fence.WithHolder(context.Background(), h), key)
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, srv.URL+"/settlements/2026-03-08", strings.NewReader("{}"))
		if err != nil {
			return err
		}
		resp, err := client.Do(req)
		if err != nil {
			return err
		}
		resp.Body.Close()
		fmt.Println(owner, "settled:", resp.StatusCode)
		return nil
	}

	// replica-b took the lease over (token 1002) and settled. replica-a,
	// paused past its TTL, wakes up with token 1001. Retrying the same slot
	// key would get replica-b's stored answer (a replay wins over the fence);
	// a new operation on the resource is refused.
	_ = settle("settle:2026-03-08T02:00:00Z:", 1002, "replica-b")
	err := settle("adjust:2026-03-08T02:00:00Z:", 1001, "replica-a")
	var stale *fence.StaleTokenError
	if errors.As(err, &stale) {
		fmt.Println("replica-a refused: presented", stale.Presented, "current", stale.Current)
	}
	// Output:
	// replica-b settled: 202
	// replica-a refused: presented 1001 current 1002
}

// Keys travel as RFC 8941 sf-strings.
func ExampleFormatKey() {
	v, _ := httpfence.FormatKey(`job:"daily"`)
	fmt.Println(v)
	key, _ := httpfence.ParseKey(v)
	fmt.Println(key)
	_, err := httpfence.ParseKey("unquoted")
	fmt.Println(errors.Is(err, httpfence.ErrInvalidKey))
	// Output:
	// "job:\"daily\""
	// job:"daily"
	// true
}
