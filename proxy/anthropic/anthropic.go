// Package anthropic adapts the Anthropic Messages API (POST /v1/messages) to
// toolgate's neutral pipeline.
package anthropic

import (
	"errors"

	"github.com/toolgate/toolgate/proxy/api"
	"github.com/toolgate/toolgate/recovery"
	"github.com/toolgate/toolgate/validate"
)

// Adapter is the Messages adapter.
type Adapter struct{}

var _ api.Adapter = Adapter{}

var errTODO = errors.New("anthropic: not implemented")

// Name implements api.Adapter.
func (Adapter) Name() string { return "messages" }

// ParseRequest implements api.Adapter.
func (Adapter) ParseRequest([]byte) (*api.Request, error) { return nil, errTODO }

// ParseResponse implements api.Adapter.
func (Adapter) ParseResponse([]byte) (*api.Response, error) { return nil, errTODO }

// FollowUp implements api.Adapter.
func (Adapter) FollowUp(*api.Request, *api.Response, *recovery.Query) ([]byte, error) {
	return nil, errTODO
}

// Render implements api.Adapter.
func (Adapter) Render(*api.Request, *api.Response, []api.Final) ([]byte, error) { return nil, errTODO }

// ErrorBody implements api.Adapter.
func (Adapter) ErrorBody(*api.Escalated) []byte { return nil }

// CallJSON implements api.Adapter.
func (Adapter) CallJSON(validate.ToolCall) []byte { return nil }

// NewStream implements api.Adapter.
func (Adapter) NewStream(*api.Request) api.Stream { return nil }
