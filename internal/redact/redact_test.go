package redact_test

import (
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/require"

	"github.com/holdfast-go/holdfast/internal/redact"
)

func TestString(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ name, in, want string }{
		{"Empty", "", ""},
		{"NoSecret", "bank API down (attempt 2)", "bank API down (attempt 2)"},
		{"URLWithoutUserinfo", "GET http://127.0.0.1:8080/admin/jobs: refused", "GET http://127.0.0.1:8080/admin/jobs: refused"},
		{"URLUserOnly", "dial postgres://app@db/x: refused", "dial postgres://app@db/x: refused"},
		{"PostgresURL", "dial postgres://user:s3cret@db.internal/payments: refused", "dial postgres://user:***@db.internal/payments: refused"},
		{"RedisEmptyUser", "redis://:s3cret@cache:6379/0", "redis://:***@cache:6379/0"},
		{"AnyScheme", "amqp+ssl://guest:s3cret@mq", "amqp+ssl://guest:***@mq"},
		{"SchemeCase", "POSTGRES://u:s3cret@db", "POSTGRES://u:***@db"},
		{"PasswordWithAt", "postgres://u:p@ss@db/x", "postgres://u:***@db/x"},
		{"TwoURLs", "a redis://:x1@h1 b redis://u:x2@h2", "a redis://:***@h1 b redis://u:***@h2"},
		{"URLQueryPassword", "postgres://db/x?sslmode=disable&password=s3cret&user=u", "postgres://db/x?sslmode=disable&password=***&user=u"},
		{"DSN", "host=db user=app password=s3cret dbname=x", "host=db user=app password=*** dbname=x"},
		{"DSNQuoted", "host=db password='s3 cret' dbname=x", "host=db password='***' dbname=x"},
		{"KeyCase", "PASSWORD=s3cret Passwd=s3cret PWD=s3cret", "PASSWORD=*** Passwd=*** PWD=***"},
		{"ColonForm", "secret: s3cret, next", "secret: ***, next"},
		{"APIKeyForms", "api_key=a1 apikey=a2 api-key: a3 X-Api-Key: a4", "api_key=*** apikey=*** api-key: *** X-Api-Key: ***"},
		{"AccessKey", "aws_access_key_id=AKIA1 aws_secret_access_key=abc/def", "aws_access_key_id=*** aws_secret_access_key=***"},
		{"Token", "token=t1 access_token: t2 refresh_token=t3", "token=*** access_token: *** refresh_token=***"},
		{"JSON", `{"user":"u","password":"s3\"cret","n":1}`, `{"user":"u","password":"***","n":1}`},
		{"JSONSpaced", `{"client_secret" : "abc"}`, `{"client_secret" : "***"}`},
		{"JSONSingleQuotes", `{'token': 'abc'}`, `{'token': '***'}`},
		{"JSONEscapedInString", `body "{\"token\":\"abc\",\"n\":1}"`, `body "{\"token\":\"***\",\"n\":1}"`},
		{"BareValueWithBackslash", `password=ab\cd next`, `password=*** next`},
		{"AuthorizationHeader", "Authorization: Bearer eyJhbGciOi.x.y", "Authorization: Bearer ***"},
		{"BearerAlone", "sent Bearer abcdefgh123 to upstream", "sent Bearer *** to upstream"},
		{"BasicAlone", "Basic dXNlcjpwYXNz", "Basic ***"},
		{"BasicWord", "basic auth failed", "basic auth failed"},
		{"ShortBearerWord", "bearer bonds", "bearer bonds"},
		{"ValueStopsAtAmpersand", "?token=abc&x=1", "?token=***&x=1"},
		{"ValueStopsAtBracket", "(password=abc)", "(password=***)"},
		{"Unicode", "ü password=ü€ ü", "ü password=*** ü"},
		{"PEMPrivateKey", "load key: -----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEA7\n+x/y=\n-----END RSA PRIVATE KEY----- rejected", "load key: -----BEGIN RSA PRIVATE KEY-----***-----END RSA PRIVATE KEY----- rejected"},
		{"PEMTruncated", "bad key \"-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAA", "bad key \"-----BEGIN OPENSSH PRIVATE KEY-----***"},
		{"PEMTwoKeys", "-----BEGIN EC PRIVATE KEY-----\nAA\n-----END EC PRIVATE KEY----- and -----BEGIN PRIVATE KEY-----\nBB\n-----END PRIVATE KEY-----", "-----BEGIN EC PRIVATE KEY-----***-----END EC PRIVATE KEY----- and -----BEGIN PRIVATE KEY-----***-----END PRIVATE KEY-----"},
		{"PEMCertificateKept", "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----", "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----"},
		{"PresignedS3URL", "GET https://b.s3.amazonaws.com/k?X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Credential=AKIA%2F20261207&X-Amz-Signature=9f8e7d: 403",
			"GET https://b.s3.amazonaws.com/k?X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Credential=***&X-Amz-Signature=*** 403"},
		{"PresignedGCSURL", "?X-Goog-Signature=abc123&x=1", "?X-Goog-Signature=***&x=1"},
		{"AzureSAS", "PUT https://a.blob.core.windows.net/c/b?sv=2022-11-02&sig=AbC%2Bd%3D&se=2026: 403", "PUT https://a.blob.core.windows.net/c/b?sv=2022-11-02&sig=***&se=2026: 403"},
		{"AuthQuery", "https://h/x?auth=s3cret&y=1", "https://h/x?auth=***&y=1"},
		{"AuthAndSigWordsKept", "redis: auth: WRONGPASS invalid; sig: 11; design=x; signal=9", "redis: auth: WRONGPASS invalid; sig: 11; design=x; signal=9"},
		{"SignatureProseKept", "signature: invalid length", "signature: invalid length"},
		{"Wrapped", `scheduler: job panicked: dial "redis://default:s3cret@cache:6379": i/o timeout`, `scheduler: job panicked: dial "redis://default:***@cache:6379": i/o timeout`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got := redact.String(tc.in)
			require.Equal(t, tc.want, got)
			require.Equal(t, got, redact.String(got), "idempotent")
		})
	}
}

// Found by a fresh user's trial: words that end a path, and prose after
// "key: ", were masked ("fork/exec /etc/passwd: *** denied"), while a
// MySQL DSN's password, passphrase=, pass= and a Cookie header passed
// through. Each case both ways: the secret masked, the prose kept.
// Control: the old code masks every "kept" case and none of the new forms.
func TestStringKeysPathsAndProse(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ name, in, want string }{
		// Kept: a key word that ends a path is not a key.
		{"PathPasswd", "fork/exec /etc/passwd: permission denied", "fork/exec /etc/passwd: permission denied"},
		{"PathToken", "open /var/run/secrets/kubernetes.io/serviceaccount/token: no such file or directory", "open /var/run/secrets/kubernetes.io/serviceaccount/token: no such file or directory"},
		{"PathAPIKey", "open /etc/app/api_key: permission denied", "open /etc/app/api_key: permission denied"},
		// Kept: a letters-only value after "key: " followed by more words.
		{"ProseExpired", "invalid token: expired at 2026-12-01", "invalid token: expired at 2026-12-01"},
		{"ProseNotFound", "vault: secret: not found", "vault: secret: not found"},
		{"ProseSignature", "auth: token: signature is invalid", "auth: token: signature is invalid"},
		// Kept: a key word inside a longer word.
		{"LongerWord", "bypass=1 compass: north", "bypass=1 compass: north"},
		// Masked: the same keys with secret values.
		{"PasswdValue", "passwd: hunter2 rejected", "passwd: *** rejected"},
		{"TokenValueWithDigit", "invalid token: s3cret at 2026-12-01", "invalid token: *** at 2026-12-01"},
		{"SecretLettersEndingText", "vault: secret: hunter", "vault: secret: ***"},
		{"SecretLettersEndingClause", "secret: hunter, next", "secret: ***, next"},
		{"SecretLettersEndingLine", "secret: hunter\nnext line", "secret: ***\nnext line"},
		{"NumericToken", "stale token: 17 < 18", "stale token: *** < 18"},
		{"NoSpaceAfterColon", "token:expired at", "token:*** at"},
		{"EqualsAlwaysMasked", "token=expired at", "token=*** at"},
		{"QuotedKeyAlwaysMasked", `{"token": "expired at"}`, `{"token": "***"}`},
		{"PathThenKey", "/etc/app password=s3cret", "/etc/app password=***"},
		{"AfterASkippedPath", "open /etc/passwd: denied; password=s3cret", "open /etc/passwd: denied; password=***"},
		// Masked: the new forms.
		{"MySQLDSN", "mysql: user:hunter2@tcp(db:3306)/x", "mysql: user:***@tcp(db:3306)/x"},
		{"MySQLDSNAtStart", "app:p@ss@unix(/run/mysqld.sock)/x?parseTime=true", "app:***@unix(/run/mysqld.sock)/x?parseTime=true"},
		{"MySQLDSNQuoted", `open "app:hunter2@tcp(db)/x": refused`, `open "app:***@tcp(db)/x": refused`},
		{"MySQLDSNNoPassword", "dial app@tcp(db:3306)/x", "dial app@tcp(db:3306)/x"},
		{"MySQLURL", "mysql://app:hunter2@tcp(db)/x", "mysql://app:***@tcp(db)/x"},
		{"Passphrase", "passphrase=hunter2 ssh_passphrase: abc1", "passphrase=*** ssh_passphrase: ***"},
		{"Pass", "pass=hunter2 DB_PASS=hunter2 smtp.pass: x1", "pass=*** DB_PASS=*** smtp.pass: ***"},
		{"Cookie", "GET /x: Cookie: session=hunter2; theme=dark", "GET /x: Cookie: ***"},
		{"SetCookie", "Set-Cookie: sid=hunter2; Path=/; HttpOnly\nnext", "Set-Cookie: ***\nnext"},
		{"CookieInQuotes", `header "Cookie: sid=hunter2" sent`, `header "Cookie: ***" sent`},
		{"CookieProse", "invalid cookie: missing session", "invalid cookie: missing session"},
		// Review: a key after '/' with '=' or a value that is no word is
		// masked; a quoted key is one whatever precedes its quote; a
		// capital or a long value is no word of a sentence.
		{"PathKeyEquals", "vault read secret/app/password=hunter2", "vault read secret/app/password=***"},
		{"PathKeyDigits", "auth/token: abc123", "auth/token: ***"},
		{"URLPathKeyEquals", "GET /v1/token=abc123", "GET /v1/token=***"},
		{"QuotedKeyAfterWord", `token=abc"password":"x"`, `token=***"password":"***"`},
		{"QuotedKeyAfterWordSingle", `token=abc'password':'x'`, `token=***'password':'***'`},
		{"MixedCaseValue", "X-Api-Key: AbCdEfGhIjKlMnOp sent upstream", "X-Api-Key: *** sent upstream"},
		{"CapitalisedValue", "db password: Secretpass host: x", "db password: *** host: x"},
		{"LongValue", "token: abcdefghijklmnop sent", "token: *** sent"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got := redact.String(tc.in)
			require.Equal(t, tc.want, got)
			require.Equal(t, got, redact.String(got), "idempotent")
		})
	}
}

// FuzzString: masking never panics, keeps valid UTF-8 valid, is
// idempotent, and a password planted in a URL's userinfo or after
// password= never survives, whatever text surrounds it.
// A value holding one key after another is masked whole, in one pass: a
// scan that went back into the value after each key refused took time
// quadratic in its length (32 KiB: 15 s, against 37 ms).
func TestStringLongValueOfKeys(t *testing.T) {
	t.Parallel()
	in := strings.Repeat("/pass:", 64<<10/6)
	require.Equal(t, "/pass:"+redact.Mask, redact.String(in))
	in = "GET https://h/" + strings.Repeat("token=/", 64<<10/7)
	require.Equal(t, "GET https://h/token="+redact.Mask, redact.String(in))
}

// BenchmarkStringLongValueOfKeys is the case above: linear in the text.
func BenchmarkStringLongValueOfKeys(b *testing.B) {
	in := strings.Repeat("/pass:", 64<<10/6)
	for b.Loop() {
		_ = redact.String(in)
	}
}

func FuzzString(f *testing.F) {
	for _, s := range []string{"", "dial postgres://user:s3cret@db/x", "password=x", `{"token":"x"}`, `\"token\":\"`,
		"redis://:p@h", "Authorization: Bearer abcdefgh", "/etc/passwd: no such", "u:p@tcp(h)/d", "Cookie: a=b; c=d", "pass=x", "a://b:c@d@e/f", "token: 'x", `password="`, "ü€𝄞",
		`token=abc'password=x`, `token=abc"password":"x"`, "auth/token: abc123", "/pass:/pass:/pass:", "token: ümlaut next",
		"-----BEGIN RSA PRIVATE KEY-----\nAB\n-----END RSA PRIVATE KEY-----", "-----BEGIN PRIVATE KEY-----", "?sig=x&auth=y&X-Amz-Signature=z"} {
		f.Add(s, "")
	}
	f.Fuzz(func(t *testing.T, text, pass string) {
		got := redact.String(text)
		if utf8.ValidString(text) {
			require.True(t, utf8.ValidString(got), "%q -> %q", text, got)
		}
		require.Equal(t, got, redact.String(got), "not idempotent on %q", text)

		// A planted secret: 12 letters from pass, so it cannot be a part
		// of the surrounding text by chance.
		secret := "Zq" + strings.Map(func(r rune) rune {
			if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' {
				return r
			}
			return 'x'
		}, pass+"xxxxxxxxxx")[:10]
		for _, planted := range []string{
			text + " postgres://user:" + secret + "@db/x " + text,
			text + " password=" + secret + " " + text,
			text + ` {"api_key":"` + secret + `"} ` + text,
		} {
			require.NotContains(t, redact.String(planted), secret, "in %q", planted)
		}
	})
}
