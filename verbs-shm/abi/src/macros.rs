//! Small declaration helpers used by every module of this crate.

/// Declares a C enum the way verbs.h uses it: a type alias of the enum's storage type (C
/// enums are `int`-sized) plus one constant per enumerator.
///
/// A Rust `enum` would make every unknown value coming from C undefined behaviour; an
/// integer alias keeps any value representable, and `match` on the constants still works.
macro_rules! c_enum {
    (
        $(#[$meta:meta])*
        pub enum $name:ident: $repr:ty {
            $( $(#[$vmeta:meta])* $variant:ident = $value:expr, )*
        }
    ) => {
        $(#[$meta])*
        pub type $name = $repr;
        $(
            $(#[$vmeta])*
            pub const $variant: $name = $value;
        )*
    };
}

/// Declares many C enums at once (each as `c_enum!` does) and lists every enumerator in
/// `ENUMERATORS`, so a test can compare each value with the system's verbs.h.
macro_rules! c_enums {
    ($(
        $(#[$meta:meta])*
        pub enum $name:ident: $repr:ty {
            $( $(#[$vmeta:meta])* $variant:ident = $value:expr, )*
        }
    )*) => {
        $(
            c_enum! {
                $(#[$meta])*
                pub enum $name: $repr {
                    $( $(#[$vmeta])* $variant = $value, )*
                }
            }
        )*

        /// Every enumerator declared in this module, by its C name, with its value. A test
        /// compiles a C program against the system's verbs.h to check each one.
        pub const ENUMERATORS: &[(&str, i64)] = &[
            $( $( (stringify!($variant), $variant as i64), )* )*
        ];
    };
}

/// Implements `Default` as the all-zero value for `#[repr(C)]` mirrors.
///
/// Only for types whose fields are integers, raw pointers, `Option`s of function pointers,
/// `bool`s, arrays or unions of those, or other mirrors of this kind: for each of them the
/// all-zero bit pattern is a valid value (0, null, `None`, `false`). This is also what C code
/// gets from `= {}` or `memset(…, 0, …)`, which verbs users do before filling attributes.
macro_rules! zeroed_default {
    ($($t:ty),* $(,)?) => {
        $(
            impl Default for $t {
                fn default() -> Self {
                    // Safety: the type is a #[repr(C)] mirror made only of integers, raw
                    // pointers, `Option<fn>`s, bools, and arrays/unions/structs of those (see the
                    // macro's documentation); all-zero is a valid value for every field.
                    unsafe { core::mem::zeroed() }
                }
            }
        )*
    };
}

/// Declares types that C code only ever passes by pointer (provider-private or kernel-ABI
/// structures this library never looks into). They cannot be built, moved or sized in Rust.
macro_rules! opaque {
    ($( $(#[$meta:meta])* $name:ident ),* $(,)?) => {
        $(
            $(#[$meta])*
            #[repr(C)]
            #[derive(Debug)]
            pub struct $name {
                _opaque: [u8; 0],
                _not_send_sync_unpin:
                    core::marker::PhantomData<(*mut u8, core::marker::PhantomPinned)>,
            }
        )*
    };
}

/// The size of a (possibly nested, possibly union) field, usable in constant expressions:
/// `field_size!(ibv_send_wr, wr.rdma.rkey)`. The layout assertions use it beside
/// `core::mem::offset_of!`.
#[macro_export]
macro_rules! field_size {
    ($t:ty, $($field:tt)+) => {{
        const fn size_of_pointee<T>(_: *const T) -> usize {
            core::mem::size_of::<T>()
        }
        let value = core::mem::MaybeUninit::<$t>::uninit();
        let base = value.as_ptr();
        // Safety: only the address of a field inside `value` is computed (a place projection
        // through a raw pointer into a live local); nothing is read, so the uninitialised
        // contents are never observed.
        size_of_pointee(unsafe { &raw const (*base).$($field)+ })
    }};
}
