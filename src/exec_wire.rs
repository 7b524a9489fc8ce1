//! The framing of a `gantry exec` / `gantry ssh` session, once the daemon has answered `101
//! Switching Protocols` (upgrade `gantry-exec`) on `POST /v1/jobs/{id}/exec`: both sides send
//! frames of one kind byte, a big-endian u32 length and that many bytes. Kept to what a
//! terminal session needs (kubectl's exec streams have the same channels: stdin, stdout,
//! stderr, resize, an error with the exit status).
//!
//! Hand-written rather than WebSocket: the stream is already an upgraded HTTP/1.1 connection
//! on both ends (hyper on the daemon, reqwest in the client), a frame is five bytes of header,
//! and a WebSocket crate would add a handshake and masking that buy nothing here.

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

/// The `Upgrade` header's protocol name.
pub const PROTOCOL: &str = "gantry-exec";
/// The largest frame either side accepts (a read of a terminal is far smaller).
pub const MAX_FRAME: u32 = 1 << 20;

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Frame {
    /// Client → daemon: bytes for the command's input.
    Stdin(Vec<u8>),
    /// Client → daemon: no more input (closes the command's stdin; ignored with a terminal).
    Eof,
    /// Client → daemon: the terminal's new size (rows, columns).
    Resize(u16, u16),
    /// Daemon → client: the command's output (with a terminal, everything).
    Stdout(Vec<u8>),
    Stderr(Vec<u8>),
    /// Daemon → client: the command ended with this status (128 + N for signal N); last.
    Exit(i32),
    /// Daemon → client: the session failed (the command could not start, the host went);
    /// last.
    Error(String),
}

impl Frame {
    fn kind(&self) -> u8 {
        match self {
            Frame::Stdin(_) => 0,
            Frame::Eof => 1,
            Frame::Resize(..) => 2,
            Frame::Stdout(_) => 3,
            Frame::Stderr(_) => 4,
            Frame::Exit(_) => 5,
            Frame::Error(_) => 6,
        }
    }

    pub async fn write<W: AsyncWrite + Unpin>(&self, w: &mut W) -> std::io::Result<()> {
        let body: Vec<u8> = match self {
            Frame::Stdin(b) | Frame::Stdout(b) | Frame::Stderr(b) => b.clone(),
            Frame::Eof => Vec::new(),
            Frame::Resize(r, c) => [r.to_be_bytes(), c.to_be_bytes()].concat(),
            Frame::Exit(code) => code.to_be_bytes().to_vec(),
            Frame::Error(why) => why.as_bytes().to_vec(),
        };
        let mut head = [0u8; 5];
        head[0] = self.kind();
        head[1..].copy_from_slice(&(body.len() as u32).to_be_bytes());
        w.write_all(&head).await?;
        w.write_all(&body).await?;
        w.flush().await
    }

    /// The next frame, `None` at a clean end of the stream.
    pub async fn read<R: AsyncRead + Unpin>(r: &mut R) -> std::io::Result<Option<Frame>> {
        let kind = match r.read_u8().await {
            Ok(k) => k,
            Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => return Ok(None),
            Err(e) => return Err(e),
        };
        let len = r.read_u32().await?;
        let bad = |why: String| std::io::Error::new(std::io::ErrorKind::InvalidData, why);
        if len > MAX_FRAME {
            return Err(bad(format!(
                "a frame of {len} bytes, over the limit of {MAX_FRAME}"
            )));
        }
        let mut body = vec![0u8; len as usize];
        r.read_exact(&mut body).await?;
        let fixed = |n: usize| {
            if body.len() == n {
                Ok(())
            } else {
                Err(bad(format!(
                    "frame kind {kind}: {} bytes, not {n}",
                    body.len()
                )))
            }
        };
        Ok(Some(match kind {
            0 => Frame::Stdin(body),
            1 => Frame::Eof,
            2 => {
                fixed(4)?;
                Frame::Resize(
                    u16::from_be_bytes([body[0], body[1]]),
                    u16::from_be_bytes([body[2], body[3]]),
                )
            }
            3 => Frame::Stdout(body),
            4 => Frame::Stderr(body),
            5 => {
                fixed(4)?;
                Frame::Exit(i32::from_be_bytes([body[0], body[1], body[2], body[3]]))
            }
            6 => Frame::Error(String::from_utf8_lossy(&body).into_owned()),
            k => return Err(bad(format!("unknown frame kind {k}"))),
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_read_back_as_written_and_bad_ones_are_refused() {
        let rt = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        rt.block_on(async {
            let frames = vec![
                Frame::Stdin(b"ls\n".to_vec()),
                Frame::Eof,
                Frame::Resize(40, 120),
                Frame::Stdout(vec![0, 1, 255]),
                Frame::Stderr(Vec::new()),
                Frame::Exit(-1),
                Frame::Error("gone".into()),
            ];
            let mut buf = Vec::new();
            for f in &frames {
                f.write(&mut buf).await.unwrap();
            }
            let mut r = &buf[..];
            for f in &frames {
                assert_eq!(Frame::read(&mut r).await.unwrap().as_ref(), Some(f));
            }
            assert_eq!(Frame::read(&mut r).await.unwrap(), None);
            // Too long, unknown, and a resize of the wrong size.
            let mut r: &[u8] = &[3, 255, 255, 255, 255];
            assert!(Frame::read(&mut r).await.is_err());
            let mut r: &[u8] = &[9, 0, 0, 0, 0];
            assert!(Frame::read(&mut r).await.is_err());
            let mut r: &[u8] = &[2, 0, 0, 0, 1, 7];
            assert!(Frame::read(&mut r).await.is_err());
        });
    }
}
