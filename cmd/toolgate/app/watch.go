package app

import (
	"path/filepath"
	"time"

	"github.com/fsnotify/fsnotify"
	"go.uber.org/zap"
)

// debounce gathers the burst of events one save or one ConfigMap update
// makes (several writes, or create + rename + remove) into one reload.
const debounce = 300 * time.Millisecond

// Grace is how long a drain waits for requests in flight.
func (a *App) Grace() time.Duration {
	return a.Store.Load().Config.Shutdown.Grace.D()
}

// Watch reloads when the config file, a file it names, or the folder's
// Kubernetes "..data" symlink is replaced whole: renamed over, or created
// by a rename (`mv`, an editor's write-then-rename, the ConfigMap symlink
// swap). The folder is watched rather than the file: a rename ends a watch
// on the file itself.
//
// A file written in place is never applied by the watcher, however long
// the writer pauses: the watcher cannot know when the last byte landed,
// and the first part of a valid file (everything before catalog:) is
// often valid on its own, so applying it would drop the catalog and every
// confirm policy until the rest arrived. Such a write is logged with what
// to do instead: rename a finished file over it, or send SIGHUP.
func (a *App) Watch() (stop func(), err error) {
	w, err := fsnotify.NewWatcher()
	if err != nil {
		return nil, err
	}
	dir := filepath.Dir(a.Path)
	if err := w.Add(dir); err != nil {
		w.Close()
		return nil, err
	}
	done := make(chan struct{})
	go a.watch(w, done)
	return func() { close(done); w.Close() }, nil
}

// burst is what one debounce window saw of the relevant names.
type burst struct {
	// replaced: a name was created, renamed or removed.
	replaced bool
	// written names a file written in place, "" when none was.
	written string
}

func (a *App) watch(w *fsnotify.Watcher, done chan struct{}) {
	var timer *time.Timer
	var b burst
	fire := make(chan struct{}, 1)
	for {
		select {
		case <-done:
			if timer != nil {
				timer.Stop()
			}
			return
		case ev, ok := <-w.Events:
			if !ok {
				return
			}
			if !a.relevant(ev.Name) || !b.add(ev) {
				continue
			}
			if timer == nil {
				timer = time.AfterFunc(debounce, func() {
					select {
					case fire <- struct{}{}:
					default:
					}
				})
			} else {
				timer.Reset(debounce)
			}
		case <-fire:
			a.settle(b)
			b = burst{}
		case err, ok := <-w.Errors:
			if !ok {
				return
			}
			a.Log.Warn("config watch error", zap.Error(err))
		}
	}
}

// add notes one event; it reports whether the event can change the
// config (a change of mode alone cannot).
func (b *burst) add(ev fsnotify.Event) bool {
	switch {
	case ev.Has(fsnotify.Write):
		b.written = filepath.Base(ev.Name)
	case ev.Has(fsnotify.Create) || ev.Has(fsnotify.Rename) || ev.Has(fsnotify.Remove):
		b.replaced = true
	default:
		return false
	}
	return true
}

// settle acts on a burst once it is quiet: a file replaced whole is
// reloaded; one written in place is left for SIGHUP.
func (a *App) settle(b burst) {
	if b.written != "" {
		a.Log.Warn("config file written in place; not reloaded, since a write in progress cannot be told from a finished one. "+
			"Write the new file beside it and rename it over, or send SIGHUP once the write is done",
			zap.String("file", b.written))
		return
	}
	if b.replaced {
		_ = a.Reload()
	}
}

// relevant reports whether a changed path can change the config.
func (a *App) relevant(name string) bool {
	base := filepath.Base(name)
	if base == filepath.Base(a.Path) || base == "..data" {
		return true
	}
	c := a.Store.Load().Config
	for _, f := range c.Catalog.Files {
		if filepath.Base(f) == base {
			return true
		}
	}
	return c.Recovery.PromptFile != "" && filepath.Base(c.Recovery.PromptFile) == base
}
