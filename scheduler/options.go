package scheduler

import (
	"fmt"
	"log/slog"
	"math/rand/v2"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/holdfast-go/holdfast/clock"
	"github.com/holdfast-go/holdfast/internal/errfamily"
	"github.com/holdfast-go/holdfast/internal/redact"
	"github.com/holdfast-go/holdfast/lease"
	"github.com/holdfast-go/holdfast/scheduler/ledger"
)

// ErrInvalidOptions matches every Options that New rejects.
var ErrInvalidOptions = fmt.Errorf("scheduler: %w", errfamily.ErrInvalidOptions)

// defaultMaxConcurrentClaims bounds the claims (and runs) one Scheduler
// works on at once (64).
const defaultMaxConcurrentClaims = 64

// Options configures a Scheduler.
type Options struct {
	// Leases acquires the job leases. Required.
	Leases *lease.Client
	// Ledger records runs. Required; redisledger.New gives the default
	// store, pgledger.New a Postgres one (packages under
	// scheduler/ledger).
	Ledger ledger.Ledger
	// Logger receives job_claimed, job_claim_skipped, job_run_finished,
	// slot_skipped, slots_unrecorded, clock_stepped, clock_jumped,
	// ledger_reset and stale_token_rejected events. Default: discard.
	Logger *slog.Logger
	// Observer receives measurements (see scheduler/schedprom).
	Observer Observer
	// MaxConcurrentClaims bounds how many (job, partition) claims run at
	// once on this replica, their runs included. Default 64. A run that
	// ends its claim leaves the pool when its job function returns,
	// before its outcome is recorded (which may wait for the batch
	// claims under way, see the package doc).
	MaxConcurrentClaims int
	// Clock is the time source of every decision: slot timers, lateness,
	// retry times, heartbeats, Job.Timeout, and the now passed to every
	// ledger call. Default clock.Real() (which follows testing/synctest).
	// Tests pass a *clock.Fake to step the wall clock, freeze time or skew
	// replicas. The lease's own trust window stays on the real clock
	// (lease.Client). A typed nil is refused (ErrInvalidOptions).
	Clock clock.Clock
	// Jitter is the random source of the retry backoff's jitter. Default:
	// a PCG seeded at random. Tests pass rand.NewPCG(1, 2) for repeatable
	// retry times.
	Jitter rand.Source
	// Retention, when positive, prunes the ledger while the Scheduler
	// runs: every Retention/10 (at least a minute, at most an hour) one
	// replica (the holder of the lease "@holdfast-prune", a name no job
	// can have) calls ledger.Pruner's Prune with a cutoff of now minus
	// Retention. The Ledger must implement ledger.Pruner
	// (ErrInvalidOptions otherwise). Prune keeps what catch-up reads (open
	// slots, each pair's latest slot, horizons, fences), so Retention may
	// be shorter than a CatchUpWindow, except under OverlapAllow: there a
	// prune closes for good every slot before its cutoff that has no
	// record yet (docs/operations.md, "Retention and growth"), so keep
	// Retention above the CatchUpWindow and the LeaseTTL of such jobs. It
	// bounds how long operators see done records. 0 (the default) prunes
	// nothing: call Prune yourself (`holdfast ledger prune`, a cron job).
	// Negative is refused, and so is a positive Retention below
	// ledger.PruneMargin (1 hour): the ledger refuses such a cutoff
	// anyway, since it could close slots that may still run
	// (ErrInvalidOptions). When the store refuses the cutoff because this
	// replica's clock is ahead of the store's (ledger.PruneCutoffError),
	// the prune runs again with the store's own limit, which keeps more.
	Retention time.Duration
	// Namespace is read by NewRedis and schedpg.New only (New ignores
	// it): where the parts they build keep their data, the Redis key
	// prefix of the leases (Namespace+"lease:") and the ledger
	// (Namespace+"ledger:"), or the Postgres schema of both. Default "":
	// the parts' defaults. The leases are named after the jobs ("<job>",
	// "<job>|<partition>"), so another lease user of the same key space
	// (an election, lease.New with the default prefix) that takes a lease
	// of a job's name takes that job's lease: give one of them a prefix
	// of its own.
	Namespace string
	// Holder is this replica's holder label: recorded with every attempt
	// it begins (ledger.Attempt.Holder) and logged with its job events,
	// so views (the admin API, the console, holdfast job runs) and logs tell
	// which replica ran a slot without showing the lease owner, which is
	// a write capability (see fence.OwnerID). Default: the Leases
	// client's label (lease.Options.Holder) when it has one, else the
	// host name (os.Hostname, read once by New; none when it fails or is
	// not a valid label). lease.CheckHolder's rules apply
	// (ErrInvalidOptions). The leases themselves show the Leases
	// client's label: give lease.Options.Holder the same value.
	Holder string
	// Redact masks secrets in the text of a failed job's error at the one
	// place it becomes text, before anything stores or shows it: the
	// error the ledger stores (so the admin API, the console and `holdfast
	// runs` show it masked) and the job_run_finished event's error
	// attribute. Runs and Record apply it again to what they read, for
	// records stored before it was set or by a replica that lacks it, so
	// it must leave its own output unchanged. Default DefaultRedact (URL
	// and MySQL DSN passwords, password=/token: s3cret/"api_key":"..."
	// values, Bearer credentials, Cookie headers). Wrap DefaultRedact to mask more; pass a function
	// that returns its argument to store errors as they are.
	Redact func(string) string
	// TracerProvider gives the tracer of the scheduler's spans
	// (holdfast.claim, holdfast.attempt; docs/operations.md, "Traces"):
	// the job function's ctx carries the attempt's span, so sink writes
	// made with it are its children. Default otel.GetTracerProvider(): no
	// spans are recorded until the application installs an SDK.
	TracerProvider trace.TracerProvider
}

// DefaultRedact is the default Options.Redact. It masks, with "***" and
// in any case: the password of a URL's userinfo, any scheme
// (postgres://user:s3cret@db becomes postgres://user:***@db,
// redis://:s3cret@h becomes redis://:***@h) and of a Go MySQL driver DSN
// (app:s3cret@tcp(db:3306)/x); the value of a key naming a secret
// (password, passwd, passphrase, pwd, secret, token, api_key or apikey,
// access_key, private_key, credential, authorization, signature, or a
// key that is pass or ends in _pass, -pass or .pass) as k=v, k:v, k: v,
// "k":"v", and of sig= and auth= (a presigned or SAS URL's signature);
// Bearer and Basic credentials; a Cookie or Set-Cookie header's
// name=value pairs, to the end of the line; and the body of a PEM private
// key.
//
// A key word preceded by a letter, digit, '_', '.' or '-' (a longer word,
// "bypass=1") is not a key. After "k: " (a colon and white space, nothing
// quoted), a value of 1 to 12 lower-case ASCII letters followed by a space
// or tab and a letter is a word of a sentence and is kept ("invalid
// token: expired at ...", "vault: secret: not found"), and after a key
// that ends a path ('/' before it: "open /etc/passwd: permission denied")
// such a value is kept whatever follows; any other value there is masked
// (a digit, a capital, a symbol, more than 12 letters), and after "k=",
// "k:" and a quoted key or value the value is always masked.
//
// It is a best effort over free text: a secret in a form it does not know
// passes through (a short lower-case password followed by more words
// after "password: " included), so jobs should not put secrets in their errors.
func DefaultRedact(s string) string { return redact.String(s) }
