//! Typed launches: a kernel entry named together with its parameter list
//! ([`warpforge_abi::Entry`]), launched only with arguments of exactly that list.
//!
//! [`Module::entry`] looks the entry up and checks that the PTX declares as many parameters, of
//! the same sizes, as the list says; [`TypedKernel::launch`] then takes a tuple whose every
//! position matches the list's: a value of the parameter's type, or a buffer for the
//! [`In`]/[`Out`] address markers (its stream-ordering guard is held until the kernel is
//! enqueued). The order, count and kind of parameters are checked by the compiler; a device
//! signature that drifted from the list is refused when the entry is loaded.

use std::marker::PhantomData;

use cudarc::driver::{CudaStream, DevicePtr, DevicePtrMut, SyncOnDrop};
use warpforge_abi::elements::{Bf16, F16};
use warpforge_abi::{Entry, In, Out};

use crate::error::{Error, Result};
use crate::launch::{KernelArgs, KernelParam, LaunchConfig};
use crate::module::{Kernel, Module};

/// One position of a parameter list: its size in the kernel's parameter space.
pub trait Param {
    /// Bytes the PTX `.param` of this position declares.
    const SIZE: usize;
}

impl<T: KernelParam> Param for T {
    const SIZE: usize = std::mem::size_of::<T>();
}

impl<E> Param for In<E> {
    const SIZE: usize = 8;
}

impl<E> Param for Out<E> {
    const SIZE: usize = 8;
}

/// The host type of a buffer element named in a parameter list.
pub trait BufferElement {
    /// What the host's buffers hold.
    type Host;
}

macro_rules! buffer_elements {
    ($($device:ty => $host:ty),* $(,)?) => {$(
        impl BufferElement for $device {
            type Host = $host;
        }
    )*};
}
buffer_elements!(f32 => f32, u32 => u32, u16 => u16, u8 => u8, Bf16 => half::bf16, F16 => half::f16);

/// A kernel's parameter list (a tuple of [`Param`]s).
pub trait ParamList {
    /// The sizes, in declaration order.
    fn sizes() -> Vec<usize>;
}

/// A host value that fills position `P` of a parameter list.
pub trait Arg<'a, P> {
    /// Appends `self` to `args` (a buffer's address taken on `stream`).
    fn push_to(self, args: &mut KernelArgs<'a>, stream: &'a CudaStream);
}

impl<'a, T: KernelParam> Arg<'a, T> for T {
    fn push_to(self, args: &mut KernelArgs<'a>, _stream: &'a CudaStream) {
        args.push(self);
    }
}

impl<'a, E: BufferElement, B: DevicePtr<E::Host>> Arg<'a, In<E>> for &'a B {
    fn push_to(self, args: &mut KernelArgs<'a>, stream: &'a CudaStream) {
        args.push_buffer(self, stream);
    }
}

impl<'a, E: BufferElement, B: DevicePtrMut<E::Host>> Arg<'a, Out<E>> for &'a mut B {
    fn push_to(self, args: &mut KernelArgs<'a>, stream: &'a CudaStream) {
        args.push_buffer_mut(self, stream);
    }
}

/// Arguments for every position of the parameter list `L`, in order.
pub trait LaunchArgs<'a, L> {
    /// The arguments as the driver takes them, guards held.
    fn into_args(self, stream: &'a CudaStream) -> KernelArgs<'a>;
}

macro_rules! param_lists {
    ($(($($p:ident $a:ident $v:ident),+)),+ $(,)?) => {$(
        impl<$($p: Param),+> ParamList for ($($p,)+) {
            fn sizes() -> Vec<usize> {
                vec![$($p::SIZE),+]
            }
        }

        impl<'a, $($p, $a: Arg<'a, $p>),+> LaunchArgs<'a, ($($p,)+)> for ($($a,)+) {
            fn into_args(self, stream: &'a CudaStream) -> KernelArgs<'a> {
                let ($($v,)+) = self;
                let mut args = KernelArgs::new();
                $($v.push_to(&mut args, stream);)+
                args
            }
        }
    )+};
}

param_lists!(
    (P0 A0 a0),
    (P0 A0 a0, P1 A1 a1),
    (P0 A0 a0, P1 A1 a1, P2 A2 a2),
    (P0 A0 a0, P1 A1 a1, P2 A2 a2, P3 A3 a3),
    (P0 A0 a0, P1 A1 a1, P2 A2 a2, P3 A3 a3, P4 A4 a4),
    (P0 A0 a0, P1 A1 a1, P2 A2 a2, P3 A3 a3, P4 A4 a4, P5 A5 a5),
    (P0 A0 a0, P1 A1 a1, P2 A2 a2, P3 A3 a3, P4 A4 a4, P5 A5 a5, P6 A6 a6),
    (P0 A0 a0, P1 A1 a1, P2 A2 a2, P3 A3 a3, P4 A4 a4, P5 A5 a5, P6 A6 a6, P7 A7 a7),
    (P0 A0 a0, P1 A1 a1, P2 A2 a2, P3 A3 a3, P4 A4 a4, P5 A5 a5, P6 A6 a6, P7 A7 a7, P8 A8 a8),
);

/// A kernel whose parameter list is `L`, checked against its PTX.
#[derive(Clone)]
pub struct TypedKernel<L> {
    kernel: Kernel,
    list: PhantomData<fn(L)>,
}

impl<L> std::fmt::Debug for TypedKernel<L> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("TypedKernel").field(&self.kernel.name()).finish()
    }
}

impl Module {
    /// `entry`, after checking that its PTX declares the parameter list `L`: as many parameters,
    /// each of the size `L` gives. A mismatch is [`Error::LaunchContract`].
    pub fn entry<L: ParamList>(&self, entry: Entry<L>) -> Result<TypedKernel<L>> {
        let kernel = self.kernel(entry.name())?;
        let (declared, expected) = (&kernel.directives().param_sizes, L::sizes());
        if *declared != expected {
            return Err(Error::LaunchContract {
                kernel: entry.name().to_string(),
                reason: format!("the PTX declares parameters of {declared:?} bytes, the host's list {expected:?}"),
            });
        }
        Ok(TypedKernel { kernel, list: PhantomData })
    }
}

impl<L> TypedKernel<L> {
    /// The untyped kernel (launch contract, attributes).
    pub fn kernel(&self) -> &Kernel {
        &self.kernel
    }

    /// Launches with `args`, one per position of `L`, holding `keep` (guards of addresses the
    /// caller put inside parameter structs or tensor maps) until the kernel is enqueued.
    ///
    /// # Safety
    /// As [`Kernel::launch`], less the order, count and sizes of the parameters, which the
    /// types and [`Module::entry`] have checked: every address is valid for every access the
    /// kernel makes with this launch shape, and written buffers are not used concurrently.
    pub unsafe fn launch<'a, A: LaunchArgs<'a, L>>(
        &self,
        stream: &'a CudaStream,
        config: &LaunchConfig,
        args: A,
        keep: impl IntoIterator<Item = SyncOnDrop<'a>>,
    ) -> Result<()> {
        let mut args = args.into_args(stream);
        args.extend_guards(keep);
        // SAFETY: the parameters match the entry's declared list (types + load-time check);
        // the addresses are the caller's contract.
        unsafe { self.kernel.launch(stream, config, args) }
    }
}
