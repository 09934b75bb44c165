package schedhttp_test

import (
	"crypto/subtle"
	"log"
	"log/slog"
	"net/http"

	"github.com/holdfast-go/holdfast/lease/leasedriver"
	"github.com/holdfast-go/holdfast/scheduler"
	"github.com/holdfast-go/holdfast/scheduler/schedhttp"
)

// Mount the admin handler (API and console) under /admin/, allowing
// operators with the ops token to do everything and anyone else nothing.
func ExampleNew() {
	var sched *scheduler.Scheduler      // from scheduler.New, with its jobs registered
	var inspector leasedriver.Inspector // the lease backend the lease.Client was built on (redislease.NewBackend, pglease.New)
	logger := slog.Default()
	admin, err := schedhttp.New(sched, schedhttp.Options{
		Leases: inspector, // GET /leases and the console's leases view
		Logger: logger,    // the scheduler's, so the admin events land beside its own
		Authorizer: func(r *http.Request, action schedhttp.Action, job string) error {
			// No token, or not the ops token: 401 with WWW-Authenticate
			// (RFC 6750). Compared in constant time; read the token from a
			// secret store in a real service.
			got := []byte(r.Header.Get("Authorization"))
			if subtle.ConstantTimeCompare(got, []byte("Bearer ops-token")) != 1 {
				return schedhttp.ErrUnauthenticated
			}
			return nil
		},
	})
	if err != nil { // ErrInvalidOptions: here sched is nil
		return
	}
	mux := http.NewServeMux()
	mux.Handle("/admin/", http.StripPrefix("/admin", admin)) // the console at /admin/
	srv := &http.Server{Addr: "127.0.0.1:8081", Handler: mux}
	if false { // an example: not listening in tests
		log.Fatal(srv.ListenAndServe())
	}
}
