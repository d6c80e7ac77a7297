//! LOLWUT [VERSION v] [args ...]: a piece of generated art and the server's
//! version, as Redis answers it. Clients check two things only: the reply is
//! a verbatim string (a bulk string to RESP2 clients), and it ends with a
//! line naming the version ("... Redis ver. 8.4.0"). The art is our own:
//! version 5 draws a grid of squares that come apart row by row (after Georg
//! Nees's "Schotter", as Redis's does), version 6 a night skyline; any other
//! version, the default among them, prints the version line alone, which is
//! Redis's answer for a version without a piece of its own.
//!
//! The arguments after the version are the piece's own sizes, clamped to
//! Redis's limits so that LOLWUT stays cheap; a non-integer is refused with
//! Redis's integer error. Nothing here touches the keyspace.

use crate::command::flags::*;
use crate::command::{arg_i64, is, spec, CmdResult, Ctx, Spec, NO_KEYS};

/// The rows of this family.
pub fn table() -> Vec<Spec> {
    vec![spec("lolwut", -1, READONLY | FAST, NO_KEYS, lolwut)
        .acl(&["read", "fast"])
        .group("server")
        .doc("Displays computer art and the Redis version", "5.0.0")]
}

/// Which piece a version asks for. Redis treats x.9 as a preview of the
/// next major version (4.9 is 5, 5.9 is 6).
fn piece_of(version: &str) -> u8 {
    let mut parts = version.split('.');
    let major: u32 = parts.next().and_then(|m| m.parse().ok()).unwrap_or(0);
    let minor: u32 = parts.next().and_then(|m| m.parse().ok()).unwrap_or(0);
    match (major, minor) {
        (4, 9) | (5, 0..=8) => 5,
        (5, 9) | (6, 0..=8) => 6,
        _ => 0,
    }
}

/// Integer argument `i` of the piece's own arguments, or `default`.
fn size_arg(rest: &[Vec<u8>], i: usize, default: i64, max: i64) -> Result<usize, crate::command::CmdError> {
    let v = match rest.get(i) {
        Some(a) => arg_i64(a)?,
        None => default,
    };
    Ok(v.clamp(1, max) as usize)
}

fn lolwut(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    let (version, rest) = if args.len() >= 3 && is(&args[1], "version") {
        // As Redis: the number is read as a C long and printed unsigned.
        (format!("{}.0.0", arg_i64(&args[2])? as u32), &args[3..])
    } else {
        (crate::REDIS_VERSION.to_string(), &args[1..])
    };
    let mut text = match piece_of(&version) {
        5 => {
            let cols = size_arg(rest, 0, 66, 1000)?;
            let per_row = size_arg(rest, 1, 8, 200)?;
            let per_col = size_arg(rest, 2, 12, 200)?;
            let mut s = schotter(cols, per_row, per_col, || ctx.srv.random());
            s.push_str("\nGeorg Nees - schotter, plotter on paper, 1968. ");
            s
        }
        6 => {
            let cols = size_arg(rest, 0, 80, 1000)?;
            let rows = size_arg(rest, 1, 20, 1000)?;
            let mut s = skyline(cols, rows, || ctx.srv.random());
            s.push_str("\nA city at night, drawn anew at every call. ");
            s
        }
        _ => String::new(),
    };
    text.push_str("Redis ver. ");
    text.push_str(crate::REDIS_VERSION);
    text.push('\n');
    ctx.out().verbatim(text.as_bytes());
    Ok(())
}

/// A canvas of on/off pixels, printed with Braille characters (2 pixels
/// wide and 4 high per character), so a terminal shows it at 8x resolution.
struct Canvas {
    w: usize,
    h: usize,
    px: Vec<bool>,
}

impl Canvas {
    fn new(w: usize, h: usize) -> Canvas {
        Canvas { w, h, px: vec![false; w * h] }
    }

    fn set(&mut self, x: i64, y: i64) {
        if x >= 0 && y >= 0 && (x as usize) < self.w && (y as usize) < self.h {
            self.px[y as usize * self.w + x as usize] = true;
        }
    }

    fn get(&self, x: usize, y: usize) -> bool {
        x < self.w && y < self.h && self.px[y * self.w + x]
    }

    /// A straight line between two points, one pixel per step of the longer axis.
    fn line(&mut self, (x0, y0): (f64, f64), (x1, y1): (f64, f64)) {
        let steps = (x1 - x0).abs().max((y1 - y0).abs()).ceil().max(1.0) as usize;
        for i in 0..=steps {
            let t = i as f64 / steps as f64;
            self.set((x0 + (x1 - x0) * t).round() as i64, (y0 + (y1 - y0) * t).round() as i64);
        }
    }

    /// The canvas as lines of Braille characters.
    fn render(&self) -> String {
        // Bit of each dot in a Braille cell, by (column, row).
        const DOT: [[u32; 4]; 2] = [[0x01, 0x02, 0x04, 0x40], [0x08, 0x10, 0x20, 0x80]];
        let mut s = String::with_capacity(self.w * self.h / 2);
        for cy in (0..self.h).step_by(4) {
            for cx in (0..self.w).step_by(2) {
                let mut bits = 0;
                for (dx, col) in DOT.iter().enumerate() {
                    for (dy, bit) in col.iter().enumerate() {
                        if self.get(cx + dx, cy + dy) {
                            bits |= bit;
                        }
                    }
                }
                s.push(char::from_u32(0x2800 + bits).unwrap_or(' '));
            }
            s.push('\n');
        }
        s
    }
}

/// A uniform number in [-1, 1) from a random u64.
fn unit(r: u64) -> f64 {
    (r >> 11) as f64 / (1u64 << 52) as f64 - 1.0
}

/// Squares in a grid, `per_row` across `cols` characters and `per_col`
/// down; each row is turned and shifted at random a little more than the
/// one above it.
fn schotter(cols: usize, per_row: usize, per_col: usize, mut rand: impl FnMut() -> u64) -> String {
    let w = cols * 2;
    let side = (w / per_row).max(1);
    let pad = side / 2;
    let h = side * per_col + 2 * pad;
    let mut c = Canvas::new(w, h);
    let half = side as f64 * 0.4;
    for row in 0..per_col {
        let disorder = row as f64 / per_col as f64;
        for col in 0..per_row {
            let cx = (col * side + side / 2) as f64 + unit(rand()) * disorder * half * 0.5;
            let cy = (pad + row * side + side / 2) as f64 + unit(rand()) * disorder * half * 0.5;
            let turn = unit(rand()) * disorder * std::f64::consts::FRAC_PI_4 * 1.5;
            let corner = |k: f64| {
                let a = turn + std::f64::consts::FRAC_PI_4 + k * std::f64::consts::FRAC_PI_2;
                (cx + a.cos() * half * std::f64::consts::SQRT_2, cy + a.sin() * half * std::f64::consts::SQRT_2)
            };
            for k in 0..4 {
                c.line(corner(k as f64), corner(k as f64 + 1.0));
            }
        }
    }
    c.render()
}

/// Buildings of random widths and heights against a sky with a few stars;
/// lit windows are the gaps in each facade.
fn skyline(cols: usize, rows: usize, mut rand: impl FnMut() -> u64) -> String {
    let (w, h) = (cols * 2, rows * 4);
    let mut c = Canvas::new(w, h);
    let mut x = 0;
    while x < w {
        let bw = 4 + (rand() % 10) as usize;
        let bh = h / 4 + (rand() as usize % (h * 3 / 4).max(1));
        for bx in x..(x + bw).min(w) {
            for by in (h - bh.min(h))..h {
                let window = (bx - x) % 3 == 1 && by % 4 == 1 && rand().is_multiple_of(3);
                if !window {
                    c.set(bx as i64, by as i64);
                }
            }
        }
        x += bw + (rand() % 3) as usize;
    }
    for _ in 0..w / 8 {
        c.set((rand() as usize % w) as i64, (rand() as usize % (h / 3).max(1)) as i64);
    }
    c.render()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_pick_pieces_as_redis_does() {
        assert_eq!(piece_of("5.0.0"), 5);
        assert_eq!(piece_of("4.9.0"), 5);
        assert_eq!(piece_of("5.9.0"), 6);
        assert_eq!(piece_of("6.2.0"), 6);
        assert_eq!(piece_of("6.9.0"), 0);
        assert_eq!(piece_of("8.4.0"), 0);
        assert_eq!(piece_of("0.0.0"), 0);
    }

    #[test]
    fn pieces_have_the_asked_width() {
        let mut seed = 7u64;
        let mut rand = move || {
            seed = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            seed
        };
        let art = schotter(20, 4, 3, &mut rand);
        assert!(art.lines().all(|l| l.chars().count() == 20));
        assert!(art.chars().any(|ch| ch != '\u{2800}' && ch != '\n'));
        let art = skyline(30, 5, &mut rand);
        assert_eq!(art.lines().count(), 5);
        assert!(art.lines().all(|l| l.chars().count() == 30));
    }
}
