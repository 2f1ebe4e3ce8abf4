package approval

import (
	"strings"
	"sync"
	"time"

	"github.com/toolgate/toolgate/internal/webhook"
)

// notifyQueue bounds the notifications waiting to go out.
const notifyQueue = 256

// notifyDrain is how long Close lets queued notifications go out.
var notifyDrain = 5 * time.Second

// Notifier POSTs each new pending approval to approvals.notify, signed
// like the webhook sink and retried with backoff, from its own goroutine:
// a slow or dead receiver delays only later notifications, and a full
// queue drops one and counts it, never holding up a request.
type Notifier struct {
	poster  *webhook.Poster
	queue   chan []byte
	metrics *Metrics
	wg      sync.WaitGroup
	log     func(error)
	// mu orders Notify against Close: a notification racing a shutdown
	// is dropped, never sent on a closed queue.
	mu     sync.RWMutex
	closed bool
}

// NewNotifier starts a notifier for url; secret signs each body when set.
// log hears of each notification given up (nil: nobody).
func NewNotifier(url, secret string, r webhook.Retry, m *Metrics, log func(error)) *Notifier {
	n := &Notifier{poster: webhook.New(url, secret, r), queue: make(chan []byte, notifyQueue), metrics: m, log: log}
	n.wg.Add(1)
	go func() {
		defer n.wg.Done()
		for body := range n.queue {
			if err := n.poster.Deliver(body); err != nil {
				n.metrics.failed()
				if n.log != nil {
					n.log(err)
				}
			}
		}
	}()
	return n
}

// Notify queues body without waiting.
func (n *Notifier) Notify(body []byte) {
	n.mu.RLock()
	defer n.mu.RUnlock()
	if n.closed {
		n.metrics.dropped()
		return
	}
	select {
	case n.queue <- body:
	default:
		n.metrics.dropped()
	}
}

// Close stops taking notifications, gives the queued ones a moment, then
// abandons their retries.
func (n *Notifier) Close() {
	n.mu.Lock()
	if n.closed {
		n.mu.Unlock()
		return
	}
	n.closed = true
	close(n.queue)
	n.mu.Unlock()
	done := make(chan struct{})
	go func() { n.wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(notifyDrain):
		n.poster.Close()
		<-done
	}
	n.poster.Close()
}

// Slack message bounds: a summary a person reads at a glance.
const maxSlackArgs = 300

// slackText is an incoming-webhook message (Slack and Mattermost both
// read "text"): the tool, its arguments redacted and cut short, the
// expiry and where to decide.
func slackText(v View, pageURL string) string {
	tool := v.Tool
	args := string(v.Arguments)
	if tool == "" {
		names := make([]string, len(v.Calls))
		for i, c := range v.Calls {
			names[i] = c.Tool
		}
		tool, args = strings.Join(names, ", "), ""
	}
	var b strings.Builder
	b.WriteString("Approval needed: ")
	b.WriteString(slackEscape(truncateRunes(tool, maxSlackArgs)))
	if args != "" {
		b.WriteString(" ")
		b.WriteString(slackEscape(truncateRunes(args, maxSlackArgs)))
	}
	b.WriteString("\nExpires: " + v.ExpiresAt.UTC().Format(time.RFC3339))
	if pageURL == "" {
		pageURL = "/ui/approvals"
	}
	b.WriteString("\nDecide: " + pageURL + "#" + v.ID)
	return b.String()
}

// slackEscape escapes what Slack's text format reads as markup.
var slackEscape = strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;").Replace
