package proxy

import (
	"context"
	"time"

	"go.uber.org/zap"

	"github.com/toolgate/toolgate/approval"
	"github.com/toolgate/toolgate/proxy/mcp"
	"github.com/toolgate/toolgate/proxy/pipeline"
)

// Drift counts a drifted MCP tool definition, logs it and hands it to the
// sinks. The route reports each definition once per action, so the log
// line is written once per definition.
func (p *mcpPipeline) Drift(_ context.Context, d *mcp.DriftReport) { p.s.drift(d) }

func (s *Server) drift(d *mcp.DriftReport) {
	s.metrics.ToolDrift.WithLabelValues(d.Server, d.Tool, d.Action).Inc()
	s.log.Warn("mcp tool definition drifted from its pin",
		zap.String("mcp_server", d.Server), zap.String("tool", d.Tool), zap.String("action", d.Action),
		zap.String("pinned_digest", d.PinnedDigest), zap.String("digest", d.Digest), zap.String("by", d.By))
	s.recorder.Sink.Record(&pipeline.EscalationRecord{Time: time.Now().UTC(), API: pipeline.APIMCP, Server: d.Server, Drift: d})
}

// PinDecided reports a person's decision on a held drift: an accepted
// definition is counted, logged and recorded as the others are; a
// rejected one stays counted as held.
func (s *Server) PinDecided(d approval.Drift) {
	if d.State == approval.DriftRejected {
		s.log.Info("mcp drifted tool definition rejected", zap.String("mcp_server", d.Server), zap.String("tool", d.Tool),
			zap.String("digest", d.Digest), zap.String("by", d.DecidedBy))
		return
	}
	s.drift(&mcp.DriftReport{Server: d.Server, Tool: d.Tool, Action: mcp.DriftAccepted, PinnedDigest: d.PinnedDigest,
		Digest: d.Digest, Diff: d.Diff, By: d.DecidedBy})
}
