//! How long CLI work (embedding the operations in `apigate search`, `eval` and `index build`)
//! says how far it is on stderr: a bar at a terminal, and elsewhere (a file, a pipe, a CI log)
//! plain lines: one when the work starts, one every [`PLAIN_EVERY`] while it runs, one when
//! it ends.

use std::io::{IsTerminal, Write};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use indicatif::{ProgressBar, ProgressStyle};

/// How often a plain line is written while the work runs.
pub(crate) const PLAIN_EVERY: Duration = Duration::from_secs(5);

/// Progress of one piece of work counted in operations.
pub(crate) struct Progress {
    shown: Shown,
}

enum Shown {
    Bar(ProgressBar),
    Plain(Mutex<Plain>),
}

/// The state of the plain lines, and where they go.
struct Plain {
    out: Box<dyn Write + Send>,
    every: Duration,
    /// Since when the current piece of work runs: the start, or the end of the previous one
    /// (the work reports its first count after its first batch).
    since: Instant,
    /// When the last line was written, while a piece of work runs.
    last: Option<Instant>,
    total: usize,
}

impl Progress {
    /// Progress of embedding up to `total` operations (0: not known yet) on stderr: a bar
    /// at a terminal, plain lines elsewhere.
    pub(crate) fn embedding(total: usize) -> Progress {
        if std::io::stderr().is_terminal() {
            let bar = ProgressBar::new(total as u64).with_style(
                ProgressStyle::with_template(
                    "embedding {bar:40} {pos}/{len} operations, {eta} left",
                )
                .unwrap_or_else(|_| ProgressStyle::default_bar()),
            );
            Progress {
                shown: Shown::Bar(bar),
            }
        } else {
            Progress::plain(Box::new(std::io::stderr()), PLAIN_EVERY, total)
        }
    }

    /// Plain lines to `out`, one every `every` at most while the work runs.
    fn plain(out: Box<dyn Write + Send>, every: Duration, total: usize) -> Progress {
        Progress {
            shown: Shown::Plain(Mutex::new(Plain {
                out,
                every,
                since: Instant::now(),
                last: None,
                total,
            })),
        }
    }

    /// `done` of `total` operations are embedded. The first update of a piece of work starts
    /// it; `done == total` ends it (another update then starts the next piece).
    pub(crate) fn update(&self, done: usize, total: usize) {
        match &self.shown {
            Shown::Bar(bar) => {
                if bar.is_finished() {
                    bar.reset();
                }
                bar.set_length(total as u64);
                bar.set_position(done as u64);
                if done >= total {
                    bar.finish_and_clear();
                }
            }
            Shown::Plain(plain) => {
                let mut p = plain
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner);
                p.update(done, total);
            }
        }
    }

    /// `done` operations of the total given at the start.
    pub(crate) fn set(&self, done: usize) {
        let total = match &self.shown {
            Shown::Bar(bar) => bar.length().unwrap_or(0) as usize,
            Shown::Plain(plain) => {
                plain
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner)
                    .total
            }
        };
        self.update(done, total);
    }

    /// The work is over (whatever was counted): the bar is cleared.
    pub(crate) fn finish(&self) {
        if let Shown::Bar(bar) = &self.shown {
            bar.finish_and_clear();
        }
    }
}

impl Plain {
    /// A count comes only from work under way (cached vectors report none): the first one
    /// starts a piece of work, the one reaching `total` ends it.
    fn update(&mut self, done: usize, total: usize) {
        let now = Instant::now();
        self.total = total;
        // Each line is best effort: a closed stderr must not stop the work.
        let last = match self.last {
            Some(last) => last,
            None if done < total => {
                let _ = writeln!(self.out, "embedding {total} operations …");
                let _ = self.out.flush();
                self.last = Some(now);
                return;
            }
            None => now,
        };
        if done >= total {
            let _ = writeln!(
                self.out,
                "embedded {total} operations in {:.1} s",
                now.duration_since(self.since).as_secs_f64()
            );
            let _ = self.out.flush();
            self.last = None;
            self.since = now;
        } else if now.duration_since(last) >= self.every {
            let _ = writeln!(
                self.out,
                "embedding: {done}/{total} operations ({} %), {:.0} s so far",
                done * 100 / total.max(1),
                now.duration_since(self.since).as_secs_f64()
            );
            let _ = self.out.flush();
            self.last = Some(now);
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;

    /// A `Write` the test reads back.
    #[derive(Clone, Default)]
    struct Lines(Arc<Mutex<Vec<u8>>>);

    impl Write for Lines {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(buf);
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    impl Lines {
        fn text(&self) -> String {
            String::from_utf8(self.0.lock().unwrap().clone()).unwrap()
        }
    }

    /// Off a terminal: a line when the work starts, one per update once `every` has passed
    /// (zero here: every update), one when it ends.
    #[test]
    fn plain_lines_say_how_far_the_work_is() {
        let out = Lines::default();
        let p = Progress::plain(Box::new(out.clone()), Duration::ZERO, 40);
        p.set(5);
        p.set(10);
        p.set(20);
        p.set(40);
        let text = out.text();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines[0], "embedding 40 operations …", "{text}");
        assert!(
            lines[1].starts_with("embedding: 10/40 operations (25 %), "),
            "{text}"
        );
        assert!(
            lines[2].starts_with("embedding: 20/40 operations (50 %), "),
            "{text}"
        );
        assert!(lines[3].starts_with("embedded 40 operations in "), "{text}");
        assert_eq!(lines.len(), 4, "{text}");
        // A second piece of work (eval: one per index) starts again; one done in a single
        // batch says only that it is done.
        p.update(3, 3);
        p.update(1, 5);
        p.update(5, 5);
        let text = out.text();
        let tail: Vec<&str> = text.lines().skip(4).collect();
        assert!(tail[0].starts_with("embedded 3 operations in "), "{text}");
        assert_eq!(tail[1], "embedding 5 operations …", "{text}");
        assert!(tail[2].starts_with("embedded 5 operations in "), "{text}");
        assert_eq!(tail.len(), 3, "{text}");
    }

    /// Between lines, `every` must pass: updates in between write nothing.
    #[test]
    fn plain_lines_are_spaced() {
        let out = Lines::default();
        let p = Progress::plain(Box::new(out.clone()), Duration::from_secs(3600), 10);
        for done in 1..10 {
            p.set(done);
        }
        assert_eq!(out.text(), "embedding 10 operations …\n");
        p.set(10);
        assert!(out.text().contains("embedded 10 operations in "));
    }
}
