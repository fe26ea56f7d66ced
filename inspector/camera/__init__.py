"""The camera room: frames from a camera, and the gate that makes one board of the frames that show it.

`opencv` reads USB webcams, RTSP streams and video files through OpenCV; `genicam` drives an industrial
camera (GigE Vision, USB3 Vision) through Basler's pylon binding, with its settings under GenICam SFNC names
(`settings`); `gate` turns a free-running stream into one inspection per board; `photos` takes golden photos
through the line's camera, each saying the settings it was taken with (`photo_settings`). Everything here yields
`ingest.sources.Frame`s and imports nothing above ingest; the PLC's side is inspector/plc/.
"""
