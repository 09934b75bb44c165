package httpfence_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/holdfast-go/holdfast/sinks/httpfence"
)

// An Identity that returns bytes no store can key by (not UTF-8, or a NUL
// byte; PostgreSQL refuses both) is refused by the middleware itself,
// with 500 invalid-identity, before any store: the same answer on every
// store, and not a 503 store-unavailable that the Transport would retry as
// an outage. The log names the problem once, never the identity's bytes.
func TestIdentityNoStoreCanKeyByIsRefused(t *testing.T) {
	t.Parallel()
	identities := map[string]string{
		"latin1": "tenant-secret-\xe9", // a Latin-1 é, from a certificate subject say
		"nul":    "tenant-secret\x00x",
		"ok":     "tenant-secret-é",
	}
	eachBackend(t, func(t *testing.T, s stores) {
		logger, logged := jsonLog()
		f := newFixture(t, s, func(o *httpfence.Options) {
			o.Logger = logger
			o.Identity = func(r *http.Request) string { return identities[r.Header.Get("X-Tenant")] }
		})
		for _, tenant := range []string{"latin1", "nul"} {
			a := f.do(t, call{path: "/settle", key: `"k-` + tenant + `"`, token: "1000", owner: `"holder-a"`, tenant: tenant})
			require.Equal(t, http.StatusInternalServerError, a.status, "%s: %s", tenant, a.body)
			p := problemOf(t, a)
			require.Equal(t, problems+"invalid-identity", p.Type, tenant)
			require.Contains(t, p.Detail, "valid UTF-8 without NUL bytes", tenant)
		}
		require.Zero(t, f.runs.Load(), "the handler never runs")
		// A valid identity is served on the same store: nothing was left
		// behind, and the fence is untouched (token 1000 is admitted).
		a := f.do(t, call{path: "/settle", key: `"k-ok"`, token: "1000", owner: `"holder-a"`, tenant: "ok"})
		require.Equal(t, http.StatusCreated, a.status, "%s", a.body)

		logs := logged()
		require.Equal(t, 2, strings.Count(logs, `"msg":"identity_invalid"`), logs)
		require.Contains(t, logs, `"reason":"a byte that is not valid UTF-8","identity_len":15,"offset":14`)
		require.Contains(t, logs, `"reason":"a NUL byte","identity_len":15,"offset":13`)
		require.NotContains(t, logs, "tenant-secret", "the identity's bytes are not logged")
		require.NotContains(t, logs, "idempotency_store_failed")
	})
}
