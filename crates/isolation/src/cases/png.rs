//! libpng 1.6 (Debian's libpng16-16) decoding through its simplified API
//! (`png_image_begin_read_from_memory`, `png_image_finish_read`): a PNG in the input, RGBA
//! pixels in the output area.

use crate::frame::case_id;
use crate::library::Source;
use crate::{Config, Io, Library};
use zerocopy::{FromBytes, Immutable, IntoBytes};

pub const LIBRARY: Library = Library::vetted(Source::System("libpng16.so.16"));
pub const SYMBOLS: [&str; 3] = ["png_image_begin_read_from_memory", "png_image_finish_read", "png_image_free"];
/// The symbols' signatures below hold for this library and this order only.
const CASE: u64 = case_id(LIBRARY.name(), &SYMBOLS);

pub fn config() -> Config {
    Config::new(LIBRARY, &SYMBOLS)
}

/// A decoding's outcome: the image's size, or which step libpng refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, FromBytes, IntoBytes, Immutable)]
#[repr(C)]
pub struct Decoded {
    pub width: u32,
    pub height: u32,
    /// 0: decoded; 1: the header was refused; 2: the image would not fit the output area;
    /// 3: the pixels were refused; 4: the domain resolved other symbols than [`SYMBOLS`] of
    /// [`LIBRARY`], so nothing was called.
    pub status: u32,
    pub _reserved: u32,
}

/// libpng's `png_image` (png.h).
#[repr(C)]
struct Image {
    opaque: *mut u8,
    version: u32,
    width: u32,
    height: u32,
    format: u32,
    flags: u32,
    colormap_entries: u32,
    warning_or_error: u32,
    message: [u8; 64],
}

const PNG_IMAGE_VERSION: u32 = 1;
const PNG_FORMAT_RGBA: u32 = 0x03;

/// Decodes the input into RGBA pixels in the output area.
pub fn decode(_: &u64, io: &mut Io<'_>) -> Decoded {
    if !io.is_case(CASE) {
        return Decoded { width: 0, height: 0, status: 4, _reserved: 0 };
    }
    // SAFETY: the symbols are libpng's, with these C signatures (png.h).
    let (begin, finish, free) = unsafe {
        (
            std::mem::transmute::<usize, extern "C" fn(*mut Image, *const u8, usize) -> i32>(io.symbol(0)),
            std::mem::transmute::<usize, extern "C" fn(*mut Image, *const u8, *mut u8, i32, *mut u8) -> i32>(
                io.symbol(1),
            ),
            std::mem::transmute::<usize, extern "C" fn(*mut Image)>(io.symbol(2)),
        )
    };
    let mut image = Image {
        opaque: std::ptr::null_mut(),
        version: PNG_IMAGE_VERSION,
        width: 0,
        height: 0,
        format: 0,
        flags: 0,
        colormap_entries: 0,
        warning_or_error: 0,
        message: [0; 64],
    };
    let mut decoded = Decoded { width: 0, height: 0, status: 1, _reserved: 0 };
    if begin(&mut image, io.input().as_ptr(), io.input().len()) == 0 {
        return decoded;
    }
    (decoded.width, decoded.height) = (image.width, image.height);
    image.format = PNG_FORMAT_RGBA;
    let bytes = image.width as u64 * image.height as u64 * 4;
    if bytes > io.output().len() as u64 {
        free(&mut image);
        decoded.status = 2;
        return decoded;
    }
    if finish(&mut image, std::ptr::null(), io.output().as_mut_ptr(), 0, std::ptr::null_mut()) == 0 {
        free(&mut image);
        decoded.status = 3;
        return decoded;
    }
    io.set_output_len(bytes as usize);
    decoded.status = 0;
    decoded
}
