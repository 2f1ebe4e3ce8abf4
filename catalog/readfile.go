package catalog

import (
	"fmt"
	"io"
	"os"
)

// maxFileBytes bounds every file the config names (the config itself, tool
// files, the prompt file). Real ones are kilobytes; the bound turns a path
// mistyped as /dev/zero or a log file into an error instead of a process
// that reads until memory runs out.
const maxFileBytes = 32 << 20

// readFile reads a file the config depends on. A path that is not a
// regular file (a FIFO, a device, a directory) is refused before it is
// read: opening a FIFO with no writer would block a reload forever.
func readFile(path string) ([]byte, error) {
	st, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	if !st.Mode().IsRegular() {
		return nil, fmt.Errorf("%s is not a regular file (%s)", path, st.Mode().Type())
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxFileBytes+1))
	if err != nil {
		return nil, err
	}
	if len(data) > maxFileBytes {
		return nil, fmt.Errorf("%s is larger than %d MiB", path, maxFileBytes>>20)
	}
	return data, nil
}
