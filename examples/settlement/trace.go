package main

import (
	"context"
	"os"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/exporters/stdout/stdouttrace"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
)

// traceProvider installs the replica's OpenTelemetry tracer provider as
// the global one, which holdfast's packages use by default (their
// TracerProvider options): an OTLP/HTTP exporter when
// OTEL_EXPORTER_OTLP_ENDPOINT is set (the exporter reads the standard
// OTEL_EXPORTER_OTLP_* variables), else a JSON file cfg.Trace.<replica>
// when -trace is given, else none (no spans are recorded). The returned
// function flushes and shuts the provider down, within 5 s.
func traceProvider(ctx context.Context, cfg replicaConfig) (func(), error) {
	var exp sdktrace.SpanExporter
	switch {
	case os.Getenv("OTEL_EXPORTER_OTLP_ENDPOINT") != "":
		e, err := otlptracehttp.New(ctx)
		if err != nil {
			return nil, err
		}
		exp = e
	case cfg.Trace != "":
		f, err := os.Create(cfg.Trace + "." + cfg.ID)
		if err != nil {
			return nil, err
		}
		e, err := stdouttrace.New(stdouttrace.WithWriter(f))
		if err != nil {
			_ = f.Close()
			return nil, err
		}
		exp = &closingExporter{SpanExporter: e, f: f}
	default:
		return func() {}, nil
	}
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp))
	otel.SetTracerProvider(tp)
	return func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = tp.Shutdown(ctx)
	}, nil
}

// closingExporter closes its file once the exporter shut down.
type closingExporter struct {
	sdktrace.SpanExporter
	f *os.File
}

func (c *closingExporter) Shutdown(ctx context.Context) error {
	err := c.SpanExporter.Shutdown(ctx)
	if cerr := c.f.Close(); err == nil {
		err = cerr
	}
	return err
}
