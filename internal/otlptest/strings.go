package otlptest

import (
	"fmt"
	"strings"
)

func toString(v any) string {
	switch x := v.(type) {
	case string:
		return x
	case []string:
		return strings.Join(x, ",")
	default:
		return fmt.Sprint(x)
	}
}
