package exserve

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/propagation"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
)

// Telemetry makes the process's OpenTelemetry providers print what idemkit
// records through log: each span, as it ends, as one record; and each
// metric's data points, one record each, every interval (a minute when it
// is not positive) and when stopped. It sets the global tracer and meter
// providers, which otelidem.NewTracer(nil) records through, and the global
// propagator to W3C Trace Context and Baggage, so that a call's span joins
// the trace of a client that sends traceparent, and what a handler sends
// on carries it further. It returns the function that prints the last
// metrics and stops both providers. For an example's flag:
//
//	if *telemetry {
//		stop := exserve.Telemetry(log, 0)
//		defer stop(context.Background())
//	}
func Telemetry(log *slog.Logger, interval time.Duration) (stop func(context.Context) error) {
	if interval <= 0 {
		interval = time.Minute
	}
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(spanLog{log}))
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkmetric.NewPeriodicReader(metricLog{log}, sdkmetric.WithInterval(interval))))
	otel.SetTracerProvider(tp)
	otel.SetMeterProvider(mp)
	otel.SetTextMapPropagator(propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{}))
	return func(ctx context.Context) error {
		return errors.Join(tp.Shutdown(ctx), mp.Shutdown(ctx))
	}
}

// spanLog is a span exporter that logs each span.
type spanLog struct{ log *slog.Logger }

func (e spanLog) ExportSpans(ctx context.Context, spans []sdktrace.ReadOnlySpan) error {
	for _, s := range spans {
		attrs := []slog.Attr{
			slog.String("name", s.Name()),
			slog.String("kind", s.SpanKind().String()),
			slog.String("trace_id", s.SpanContext().TraceID().String()),
			slog.String("span_id", s.SpanContext().SpanID().String()),
		}
		if p := s.Parent(); p.IsValid() {
			attrs = append(attrs, slog.String("parent_span_id", p.SpanID().String()))
		}
		attrs = append(attrs, slog.String("status", s.Status().Code.String()))
		if d := s.Status().Description; d != "" {
			attrs = append(attrs, slog.String("status_description", d))
		}
		attrs = append(attrs, slog.Duration("duration", s.EndTime().Sub(s.StartTime())), otelAttrs(s.Attributes()))
		e.log.LogAttrs(ctx, slog.LevelInfo, "span", attrs...)
	}
	return nil
}

func (spanLog) Shutdown(context.Context) error { return nil }

// metricLog is a metric exporter that logs each data point.
type metricLog struct{ log *slog.Logger }

func (metricLog) Temporality(k sdkmetric.InstrumentKind) metricdata.Temporality {
	return sdkmetric.DefaultTemporalitySelector(k)
}

func (metricLog) Aggregation(k sdkmetric.InstrumentKind) sdkmetric.Aggregation {
	return sdkmetric.DefaultAggregationSelector(k)
}

func (e metricLog) Export(ctx context.Context, rm *metricdata.ResourceMetrics) error {
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			switch d := m.Data.(type) {
			case metricdata.Sum[int64]:
				for _, p := range d.DataPoints {
					e.log.LogAttrs(ctx, slog.LevelInfo, "metric", slog.String("name", m.Name), otelSet(p.Attributes), slog.Int64("value", p.Value))
				}
			case metricdata.Histogram[float64]:
				for _, p := range d.DataPoints {
					e.log.LogAttrs(ctx, slog.LevelInfo, "metric", slog.String("name", m.Name), otelSet(p.Attributes),
						slog.Uint64("count", p.Count), slog.Float64("sum", p.Sum), slog.String("unit", m.Unit))
				}
			}
		}
	}
	return nil
}

func (metricLog) ForceFlush(context.Context) error { return nil }
func (metricLog) Shutdown(context.Context) error   { return nil }

func otelSet(s attribute.Set) slog.Attr { return otelAttrs(s.ToSlice()) }

// otelAttrs is a group "attrs" of the attributes, in their order.
func otelAttrs(kvs []attribute.KeyValue) slog.Attr {
	attrs := make([]any, 0, len(kvs))
	for _, kv := range kvs {
		attrs = append(attrs, slog.Any(string(kv.Key), kv.Value.AsInterface()))
	}
	return slog.Group("attrs", attrs...)
}
