package exchange

import (
	"net/http"

	"go.uber.org/zap"

	"github.com/toolgate/toolgate/catalog"
	"github.com/toolgate/toolgate/neutral"
	"github.com/toolgate/toolgate/proxy/pipeline"
	"github.com/toolgate/toolgate/recovery"
)

// decide is the verdict on this exchange's answer. streamBegun: a stream's
// first bytes went out before its answer was decided.
func (x *exchange) decide(results []*recovery.Result, streamBegun bool) pipeline.Verdict {
	return pipeline.Decide(results, pipeline.Policy{
		Shadow:    x.settings.Shadow,
		ErrorMode: x.gen.Snap.Config.Escalation.Mode != catalog.EscalationMessage || x.parsed.req.StructuredOutput,
		Hold:      x.holdable(results, streamBegun),
	})
}

// perform carries out the verdict, once, for everything but the client:
// the calls and the ladder's steps are counted, the observer sees the
// steps, every escalation of every choice is completed, counted and given
// to the sinks (in error mode too, where only the first one answers), and
// a held answer is stored for a person's yes. held renders the answer as
// it would be released; nil when this answer cannot be held.
func (x *exchange) perform(results []*recovery.Result, v *pipeline.Verdict, held *heldCopy) pipeline.Effects {
	x.countCalls(results)
	x.observe(results)
	var fx pipeline.Effects
	for _, i := range v.Escalating() {
		fx.Escalations = append(fx.Escalations, x.escalated(results[i]))
	}
	if n := len(fx.Escalations); n > 0 {
		// The header names the escalation the answer carries: the one that
		// replaces it, or the last message.
		x.out.escalationID = fx.Escalations[n-1].ID
		if v.ErrorMode() {
			fx.Answering = fx.Escalations[0]
			x.out.escalationID = fx.Answering.ID
		}
	}
	if v.Held() != nil && fx.Answering != nil && held != nil {
		fx.Answering, fx.StoreDown = x.hold(v, fx.Answering, held)
	}
	return fx
}

// finish decides a judged plain answer, carries the verdict out and writes
// the reply the two make.
func (x *exchange) finish(resp *neutral.Answer, upHeader http.Header, results []*recovery.Result) {
	v := x.decide(results, false)
	var held *heldCopy
	if v.Held() != nil {
		held = &heldCopy{contentType: contentTypeOf(upHeader), render: func() ([]byte, error) { return x.heldAnswer(resp, v.Held()) }}
	}
	fx := x.perform(results, &v, held)
	x.write(x.answerOf(&v, &fx, resp, upHeader))
}

// answerOf is the reply a verdict and its effects make of a plain answer.
func (x *exchange) answerOf(v *pipeline.Verdict, fx *pipeline.Effects, resp *neutral.Answer, upHeader http.Header) pipeline.Reply {
	switch {
	case v.Upstream() != nil:
		return pipeline.HandBackReply(x.codec, v.Upstream())
	case fx.StoreDown:
		return pipeline.FailureReply(x.codec, pipeline.StoreFailure(storeDownHeld))
	case fx.Answering != nil:
		return pipeline.EscalationReply(x.codec, fx.Answering, v.Outcome())
	case !v.Changed():
		// The common case: every call valid, the upstream's bytes go out as is.
		return pipeline.AnswerReply(upHeader, resp.Body, v.Outcome())
	}
	body, err := x.codec.EncodeAnswer(resp, v.Actions(fx))
	if err != nil {
		x.env.Log.Error("render failed", zap.String("request_id", x.requestID), zap.Error(err))
		return pipeline.FailureReply(x.codec, pipeline.Classify(pipeline.ErrRender))
	}
	return pipeline.AnswerReply(upHeader, body, v.Outcome())
}
