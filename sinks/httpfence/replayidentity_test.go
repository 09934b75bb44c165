package httpfence_test

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/holdfast-go/holdfast/fence"
	"github.com/holdfast-go/holdfast/sinks/httpfence"
	"github.com/holdfast-go/holdfast/sinks/httpfence/httpfencetest"
)

// A documented non-guarantee (docs/security.md, row 2b; the package's
// "Authenticated fencing"): with Identity and a Verifier, keys and fences
// are per identity, so a captured signed request replayed by ANOTHER
// authenticated identity within MaxSignatureAge finds no record and runs
// the handler once more, with the original holder's token, under that
// identity. A replay by the same identity gets the stored answer. When the
// protocol binds signatures to identities, this test flips: change it and
// the documents together.
func TestReplayByAnotherIdentityIsNotDeduplicated(t *testing.T) {
	t.Parallel()
	now := time.Now()
	holder := fence.Holder{Scope: "settle|eu", Token: fence.Token(now.UnixMicro()), Owner: "owner-of-billing"}
	captured := signedHeaders(t, testSigner(t), now, "/charge", "{}", "settle:2026-03-08T02:00:00Z:eu", holder)

	type run struct {
		client string
		token  fence.Token
	}
	setup := func(t *testing.T, wrap func(http.Handler) http.Handler) (send func(client string) int, runs *[]run, fnc *httpfencetest.MemoryFence) {
		fnc = httpfencetest.NewMemoryFence()
		runs = &[]run{}
		mw, err := httpfence.Middleware(httpfence.Options{
			Store: httpfencetest.NewMemoryStore(), Fence: fnc, Verifier: testVerifier(t),
			Identity: func(r *http.Request) string { return r.Header.Get("X-Client") }, // stands for mTLS or a bearer token
			Now:      func() time.Time { return now },
		})
		require.NoError(t, err)
		h := mw(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			hd, _ := fence.HolderFromContext(r.Context())
			*runs = append(*runs, run{r.Header.Get("X-Client"), hd.Token})
			w.WriteHeader(http.StatusCreated)
		}))
		if wrap != nil {
			h = wrap(h)
		}
		send = func(client string) int {
			r := httptest.NewRequest(http.MethodPost, "http://sink.test/charge", strings.NewReader("{}"))
			r.Header = captured.Clone()
			r.Header.Set("X-Client", client)
			w := httptest.NewRecorder()
			h.ServeHTTP(w, r)
			return w.Code
		}
		return send, runs, fnc
	}
	// fenceAt reports the token fnc holds for client's fence of /charge.
	fenceAt := func(t *testing.T, fnc *httpfencetest.MemoryFence, client string) fence.Token {
		err := fnc.Accept(t.Context(), httpfence.FenceResource(client, "/charge"), fence.Holder{Scope: holder.Scope, Token: 1, Owner: "probe"})
		var stale *fence.StaleTokenError
		if errors.As(err, &stale) {
			return stale.Current
		}
		require.NoError(t, err)
		return 0
	}

	t.Run("ReplayBySameIdentityGetsTheStoredAnswer", func(t *testing.T) {
		send, runs, _ := setup(t, nil)
		require.Equal(t, http.StatusCreated, send("billing-job"))
		require.Equal(t, http.StatusCreated, send("billing-job"))
		require.Equal(t, []run{{"billing-job", holder.Token}}, *runs)
	})

	t.Run("ReplayByAnotherIdentityRunsUnderIt", func(t *testing.T) {
		send, runs, fnc := setup(t, nil)
		require.Equal(t, http.StatusCreated, send("billing-job"))
		require.Equal(t, http.StatusCreated, send("other-tenant"), "not deduplicated: another identity's namespace")
		require.Equal(t, []run{{"billing-job", holder.Token}, {"other-tenant", holder.Token}}, *runs,
			"the handler ran again, with the original holder's token")
		require.Equal(t, holder.Token, fenceAt(t, fnc, "other-tenant"), "under the second identity's fence")
		// From then on the replay is deduplicated in that namespace too.
		require.Equal(t, http.StatusCreated, send("other-tenant"))
		require.Len(t, *runs, 2)
	})

	// The mitigation docs/security.md gives, with today's API: one signing
	// key per identity, and a handler wrapping the middleware that refuses
	// a Fencing-Signature whose kid is not the authenticated caller's key.
	t.Run("PerIdentityKeyCheckRefusesTheReplay", func(t *testing.T) {
		keyOf := map[string]string{"billing-job": keyNew.ID, "other-tenant": keyOld.ID}
		kidCheck := func(next http.Handler) http.Handler {
			return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if v := r.Header.Get(httpfence.SignatureHeader); v != "" {
					sig, err := httpfence.ParseSignature(v)
					if err != nil || sig.KeyID != keyOf[r.Header.Get("X-Client")] {
						http.Error(w, "signing key not this client's", http.StatusForbidden)
						return
					}
				}
				next.ServeHTTP(w, r)
			})
		}
		send, runs, _ := setup(t, kidCheck)
		require.Equal(t, http.StatusCreated, send("billing-job"))
		require.Equal(t, http.StatusForbidden, send("other-tenant"))
		require.Len(t, *runs, 1)
	})
}
