// Foundation as objc/*.mm sees it, for tools/check_static.py on Linux (which has no Foundation). Declares exactly
// the API the runtime uses, with the signatures of Apple's SDK for arm64 macOS 14+; anything else the runtime
// starts using fails the check until it is declared here, from Apple's documentation.
#pragma once
#include <stddef.h>
#include <stdint.h>

// The SDK version (real SDKs define it in <AvailabilityInternal.h>): 15.0 unless tools/check_static.py checks the
// code against an older SDK.
#ifndef __MAC_OS_X_VERSION_MAX_ALLOWED
#define __MAC_OS_X_VERSION_MAX_ALLOWED 150000
#endif

typedef long NSInteger;
typedef unsigned long NSUInteger;
typedef bool BOOL;  // arm64's BOOL
#define YES __objc_yes
#define NO __objc_no
#define nil nullptr

#define NS_ENUM(_type, _name) \
  enum _name : _type _name;   \
  enum _name : _type
// C++ flavour of the SDK's NS_OPTIONS: the integer type, so options combine with `|`.
#define NS_OPTIONS(_type, _name) \
  _type _name;                   \
  enum : _type
#define NS_ASSUME_NONNULL_BEGIN _Pragma("clang assume_nonnull begin")
#define NS_ASSUME_NONNULL_END _Pragma("clang assume_nonnull end")
#define NS_RETURNS_RETAINED __attribute__((ns_returns_retained))
#define NS_RETURNS_INNER_POINTER __attribute__((objc_returns_inner_pointer))
// Availability is enforced by Apple clang against the real SDK; on Linux these document it only.
#define API_AVAILABLE(...)
#define API_DEPRECATED(message, ...) __attribute__((deprecated(message)))

typedef NSUInteger NSStringEncoding;
enum : NSStringEncoding { NSUTF8StringEncoding = 4 };

NS_ASSUME_NONNULL_BEGIN

@protocol NSObject
@end

__attribute__((objc_root_class))
@interface NSObject <NSObject>
+ (instancetype)alloc;
+ (instancetype)new;
- (instancetype)init;
@end

@interface NSString : NSObject
+ (nullable instancetype)stringWithUTF8String:(const char*)nullTerminatedCString;
- (nullable instancetype)initWithBytes:(const void*)bytes length:(NSUInteger)len encoding:(NSStringEncoding)encoding;
@property(nullable, readonly) const char* UTF8String NS_RETURNS_INNER_POINTER;
@end

@interface NSArray<__covariant ObjectType> : NSObject
@property(readonly) NSUInteger count;
- (ObjectType)objectAtIndex:(NSUInteger)index;
@end

@interface NSError : NSObject
@property(readonly, copy) NSString* localizedDescription;
@end

@interface NSURL : NSObject
+ (NSURL*)fileURLWithPath:(NSString*)path;
@end

NS_ASSUME_NONNULL_END
