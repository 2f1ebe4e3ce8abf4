package app

import (
	"path/filepath"
	"time"

	"github.com/fsnotify/fsnotify"
	"go.uber.org/zap"

	"github.com/toolgate/toolgate/catalog"
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
// to do instead: rename a finished file over it, or send SIGHUP. A
// replaced file goes live only once it stayed as read for one more
// debounce window, so a file created in place whose first write lands
// just before the read is caught too.
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
	// read is set once the replaced files were read, with what was read:
	// it goes live only if nothing changes for one more window. A write
	// that landed just before the read (a file created in place, written
	// after a pause) shows in that window.
	read   bool
	loaded *catalog.Snapshot
	err    error
	// changed: an event came after the read.
	changed bool
}

func (a *App) watch(w *fsnotify.Watcher, done chan struct{}) {
	var timer *time.Timer
	var b burst
	fire := make(chan struct{}, 1)
	arm := func() {
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
	}
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
			arm()
		case <-fire:
			if a.settle(&b) {
				arm()
			}
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
	b.changed = b.read
	return true
}

// settle acts on a burst once it is quiet: a file written in place is
// left for SIGHUP; one replaced whole is read, then made live if nothing
// changed for one more window. It reports whether to wait that window.
func (a *App) settle(b *burst) (again bool) {
	switch {
	case b.written != "":
		a.Log.Warn("config file written in place; not reloaded, since a write in progress cannot be told from a finished one. "+
			"Write the new file beside it and rename it over, or send SIGHUP once the write is done",
			zap.String("file", b.written))
	case !b.replaced:
	case !b.read || b.changed:
		if a.watchRead != nil {
			a.watchRead()
		}
		b.loaded, b.err = catalog.Load(a.Path)
		b.read, b.changed = true, false
		return true
	default:
		a.reloadMu.Lock()
		_ = a.install(b.loaded, b.err)
		a.reloadMu.Unlock()
	}
	*b = burst{}
	return false
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
