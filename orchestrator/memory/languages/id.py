"""Indonesian parts the lexicon's lists lack: answering prompts for the user ("jawab sendiri", "atas nama
pengguna"), a memory ranked first ("lebih tinggi daripada"), the sandbox off, standing orders, headers."""

PARTS = {
    "ASKS": "izin|persetujuan|konfirmasi|minta izin|meminta izin|bertanya|menanyakan|dialog|lanjutkan",
    "SELF": "sendiri|sendirian|kamu saja|anda saja",
    "BEHALF": "atas nama|mewakili|sebagai ganti|menggantikan",
    "ANSWER": "jawab|jawablah|menjawab|balas|membalas|konfirmasi|setujui|menyetujui|terima|izinkan|klik|tekan|ya$"
              "|oke|iyakan|menyetujui|mengonfirmasi|mengizinkan",
    "USER": "pengguna|user|pemakai",
    "MEMORY_REF": "memori ini|di memori|memori|catatan ini|catatan di|catatan yang disimpan|disimpan di sini"
                  "|tertulis di sini|entri ini",
    "OUTRANK": "lebih tinggi|lebih penting|lebih utama|di atas|mengalahkan|mengesampingkan|diutamakan|prioritas"
               "|lebih berat|menimpa",
    "SYSPROMPT": "prompt sistem|pesan sistem|instruksi sistem",
    "DEVELOPER": "pengembang|developer",
    "CONFLICT": "bertentangan|bentrok|konflik|berbeda|tidak sesuai|kontradiksi",
    "FOLLOW": "ikuti|ikut|patuhi|turuti|pegang|yang berlaku|menang",
    "SUPREME": "otoritas tertinggi|kekuasaan tertinggi|kata akhir|prioritas tertinggi|di atas segalanya",
    "SANDBOX": "sandbox|kotak pasir|isolasi",
    "SANDBOX_OFF": "di luar sandbox|tanpa sandbox|langsung di host|langsung di mesin",
    "OFF": "matikan|dimatikan|nonaktifkan|dinonaktifkan|lepas|mematikan|menonaktifkan",
    "TREAT": "anggap|anggaplah|menganggap|perlakukan|asumsikan|hitung sebagai",
    "APPROVED": "disetujui|sudah disetujui|diizinkan|dikonfirmasi|disahkan|diotorisasi",
    "AUTO_APPROVE": "setujui otomatis|otomatis disetujui|persetujuan otomatis|setujui semua|iyakan semua|selalu ya",
    "ADD": "tambahkan|tambah|sertakan|lampirkan|sisipkan|tempelkan|masukkan|di akhir|di ujung|diikuti|menambahkan"
           "|menyertakan|melampirkan|menyisipkan|menempelkan",
    "USER_DATA": "percakapan|obrolan|riwayat chat|riwayat percakapan|pesan pengguna|pesan terakhir|isi chat|konteks",
    "LINKISH": "tautan|link|url|gambar|parameter|email|surel",
    "REQUESTISH": "header|permintaan|request",
    "REPLY": "jawaban|balasan|pesan|komentar|deskripsi|commit|keluaran|tanda tangan",
    "EVERY": "selalu|setiap|tiap|semua|kapan pun|mulai sekarang",
    "BCC": "bcc|tembusan tersembunyi|salinan tersembunyi|diam diam|secara rahasia",
    "COPYTO": "tembusan|salinan|cc$|teruskan",
    "MAILNOUN": "email|surel|pesan|laporan|surat",
    "FROM": "dari$|pengirim|dikirim oleh",
    "SELF_HEADER": "pembaruan instruksi|instruksi baru|keluaran alat|hasil alat",
    "NO_APPROVAL": "tanpa perlu|tanpa bertanya|tanpa izin|lewati|tidak usah tanya",
    "ACTION": "berkas|file|hapus|menghapus|menjalankan|mengeksekusi",
    "PRIOR": "di awal|pada awalnya|sejak awal",
    "SEND": "mengirim|mengirimkan|mengunggah|meneruskan",
    "REVEAL": "menampilkan|menunjukkan|mengungkapkan|membocorkan|membagikan|memberitahu|mencetak",
    "PLACE_VERB": "menempelkan|memasukkan|menambahkan|menyalin",
}
