package schedhttp

import (
	"embed"
	"io/fs"
	"net/http"
	"path"
)

// The console is one static page (console/index.html) with its script and
// style, embedded: no build step, no dependency. It reads the API with the
// bearer token the operator types once (kept in sessionStorage).
//
//go:embed console/index.html console/console.js console/console.css
var consoleFiles embed.FS

//go:embed openapi.json
var openAPIDoc []byte

// consoleHeaders are set on every static answer: the page runs only its
// own script and style, cannot be framed (its buttons change jobs), and
// is revalidated so an upgrade shows at once.
func consoleHeaders(w http.ResponseWriter) {
	h := w.Header()
	h.Set("Content-Security-Policy", "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'none'")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("Cache-Control", "no-cache")
}

func serveConsolePage(w http.ResponseWriter, r *http.Request) {
	serveStatic(w, r, "index.html")
}

func serveConsoleFile(w http.ResponseWriter, r *http.Request) {
	serveStatic(w, r, r.PathValue("file"))
}

func serveStatic(w http.ResponseWriter, r *http.Request, name string) {
	b, err := fs.ReadFile(consoleFiles, path.Join("console", path.Clean("/"+name)))
	if err != nil {
		http.NotFound(w, r)
		return
	}
	consoleHeaders(w)
	switch path.Ext(name) {
	case ".html":
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
	case ".js":
		w.Header().Set("Content-Type", "text/javascript; charset=utf-8")
	case ".css":
		w.Header().Set("Content-Type", "text/css; charset=utf-8")
	}
	_, _ = w.Write(b) // the status is out: nothing to do about a broken connection
}

func serveOpenAPI(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-cache")
	_, _ = w.Write(openAPIDoc)
}
