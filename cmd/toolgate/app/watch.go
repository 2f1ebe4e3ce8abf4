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
// Kubernetes "..data" symlink changes. The folder is watched rather than the
// file: editors and Kubernetes replace files by rename, which ends a watch on
// the file itself.
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
	go func() {
		var timer *time.Timer
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
				if !a.relevant(ev.Name) {
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
				_ = a.Reload()
			case err, ok := <-w.Errors:
				if !ok {
					return
				}
				a.Log.Warn("config watch error", zap.Error(err))
			}
		}
	}()
	return func() { close(done); w.Close() }, nil
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
