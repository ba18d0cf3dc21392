package config

import (
	"context"
	"log/slog"
	"os"
)

// Logger builds the process logger from the log settings.
func (c Config) Logger(process string) *slog.Logger {
	var level slog.Level
	if err := level.UnmarshalText([]byte(c.LogLevel)); err != nil {
		level = slog.LevelInfo
	}
	opts := &slog.HandlerOptions{Level: level}
	var h slog.Handler
	if c.LogFormat == "text" {
		h = slog.NewTextHandler(os.Stderr, opts)
	} else {
		h = slog.NewJSONHandler(os.Stderr, opts)
	}
	return slog.New(h).With("process", process)
}

// LibraryLogger is the logger handed to a library that reports its routine
// at info level — River logs its producers' job counts every few seconds
// while periodic jobs run, and each maintenance pass — so that at the
// default level an idle process says nothing after it started. Its info
// lines go out at debug; warnings and errors pass unchanged.
func LibraryLogger(l *slog.Logger) *slog.Logger {
	return slog.New(demotedHandler{l.Handler()})
}

// demotedHandler writes info records at debug level.
type demotedHandler struct{ next slog.Handler }

func demote(level slog.Level) slog.Level {
	if level >= slog.LevelInfo && level < slog.LevelWarn {
		return slog.LevelDebug
	}
	return level
}

func (h demotedHandler) Enabled(ctx context.Context, level slog.Level) bool {
	return h.next.Enabled(ctx, demote(level))
}

func (h demotedHandler) Handle(ctx context.Context, r slog.Record) error {
	r.Level = demote(r.Level)
	return h.next.Handle(ctx, r)
}

func (h demotedHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	return demotedHandler{h.next.WithAttrs(attrs)}
}

func (h demotedHandler) WithGroup(name string) slog.Handler {
	return demotedHandler{h.next.WithGroup(name)}
}
