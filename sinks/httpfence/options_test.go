package httpfence_test

import (
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/holdfast-go/holdfast/fence"
	"github.com/holdfast-go/holdfast/sinks/httpfence"
	"github.com/holdfast-go/holdfast/sinks/httpfence/httpfencetest"
	"github.com/holdfast-go/holdfast/sinks/httpfence/problem"
)

// A signature is admitted from MaxSignatureAge before to MaxSignatureAge
// after its time, so TTL must cover twice MaxSignatureAge: TTL ==
// MaxSignatureAge is refused, and with TTL == 2*MaxSignatureAge an exact
// replay at the last instant its signature is admitted (signed by a client
// whose clock is MaxSignatureAge ahead) is answered from the original's
// record, not run again.
func TestTTLCoversTheSignatureWindow(t *testing.T) {
	t.Parallel()
	age := docMaxSignatureAge
	for _, ttl := range []time.Duration{age, 2*age - time.Second} {
		_, err := httpfence.Middleware(httpfence.Options{Store: httpfencetest.NewMemoryStore(), Fence: httpfencetest.NewMemoryFence(),
			Verifier: testVerifier(t), TTL: ttl})
		require.ErrorIs(t, err, httpfence.ErrInvalidOptions, "TTL %v", ttl)
		require.Contains(t, err.Error(), "2*MaxSignatureAge")
	}
	synctest.Test(t, func(t *testing.T) {
		var runs atomic.Int32
		mw, err := httpfence.Middleware(httpfence.Options{Store: httpfencetest.NewMemoryStore(), Fence: httpfencetest.NewMemoryFence(),
			Verifier: testVerifier(t), TTL: 2 * age})
		require.NoError(t, err)
		h := mw(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			runs.Add(1)
			time.Sleep(time.Millisecond) // the handler's work, on the bubble's clock
			w.WriteHeader(http.StatusCreated)
		}))
		start := time.Now()
		holder := fence.Holder{Scope: "s", Token: fence.Token(start.UnixMicro()), Owner: "o"}
		// The client's clock is MaxSignatureAge ahead of the server's.
		hdr := signedHeaders(t, testSigner(t), start.Add(age), "/charge", "{}", "k1", holder)
		send := func() int {
			r := httptest.NewRequest(http.MethodPost, "http://sink.test/charge", strings.NewReader("{}"))
			r.Header = hdr.Clone()
			w := httptest.NewRecorder()
			h.ServeHTTP(w, r)
			return w.Code
		}
		require.Equal(t, http.StatusCreated, send())
		time.Sleep(2*age - time.Millisecond) // to start+2*age: the signature's last admitted instant
		require.Equal(t, http.StatusCreated, send(), "the replay is answered")
		require.EqualValues(t, 1, runs.Load(), "from the original's record")
	})
}

// Verifier and AllowUnauthenticatedFencing together are refused: the opt-in
// would do nothing.
func TestVerifierWithUnauthenticatedOptInRefused(t *testing.T) {
	t.Parallel()
	_, err := httpfence.Middleware(httpfence.Options{Store: httpfencetest.NewMemoryStore(), Verifier: testVerifier(t), AllowUnauthenticatedFencing: true})
	require.ErrorIs(t, err, httpfence.ErrInvalidOptions)
	require.Contains(t, err.Error(), "AllowUnauthenticatedFencing with a Verifier")
	_, err = httpfence.Middleware(httpfence.Options{Store: httpfencetest.NewMemoryStore(), Verifier: testVerifier(t)})
	require.NoError(t, err, "control: the Verifier alone")
}

// With a Verifier, a caller without a key learns nothing from a token far
// ahead: the signature is checked first (403), and the implausible-token
// detail a key holder gets never carries the server's clock.
func TestImplausibleTokenAfterSignature(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 12, 4, 22, 0, 0, 0, time.UTC)
	srv := newSigServer(t, now, testVerifier(t))
	ahead := fence.Holder{Scope: "s", Token: fence.Token(now.Add(time.Hour).UnixMicro()), Owner: "o"}
	serverClock := strconv.FormatInt(now.UnixMicro(), 10)

	unsigned := http.Header{}
	unsigned.Set(httpfence.KeyHeader, `"k1"`)
	unsigned.Set(httpfence.TokenHeader, ahead.Token.String())
	unsigned.Set(httpfence.OwnerHeader, `"o"`)
	unsigned.Set(httpfence.ScopeHeader, `"s"`)
	code, p := srv.do(http.MethodPost, "/p", "", unsigned)
	require.Equal(t, http.StatusForbidden, code, "unsigned: refused before the ceiling is looked at")
	require.Equal(t, problem.DefaultBase+"fencing-signature-rejected", p.Type)
	require.NotContains(t, p.Detail, serverClock)

	forged := signedHeaders(t, signerOf(t, keyRogue), now.Add(-time.Hour), "/p", "", "k2", ahead) // wrong key and an hour off
	code, p = srv.do(http.MethodPost, "/p", "", forged)
	require.Equal(t, http.StatusForbidden, code)
	require.Equal(t, "signature does not match the request", p.Detail)

	signed := signedHeaders(t, testSigner(t), now, "/p", "", "k3", ahead)
	code, p = srv.do(http.MethodPost, "/p", "", signed)
	require.Equal(t, http.StatusBadRequest, code, "a key holder is told the ceiling")
	require.Equal(t, problem.DefaultBase+"implausible-fencing-token", p.Type)
	require.Equal(t, "token "+ahead.Token.String()+" is more than MaxTokenAhead (5m0s) ahead of the server's clock", p.Detail)
	require.NotContains(t, p.Detail, serverClock)
	require.Equal(t, 0, srv.runs)
}
